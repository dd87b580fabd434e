# attnacc: gnuplot script drawing output/2^x against x for each exp construction, with NaN/Inf/negative/zero regions as bands.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Input: the CSV of `attnacc expmap ... --curve FILE` (columns x, then per construction: ratio, class;
# class 0 valid, 1 nan, 2 inf, 3 negative, 4 zero, 5 subnormal).
# Usage: gnuplot -e "file='curve.csv'; out='expratio.png'" plots/expratio.gp
#        (optional: ymin=0.9; ymax=1.1 to fix the ratio axis)
if (!exists("file")) file = 'curve.csv'
if (!exists("out")) out = 'expratio.png'
if (!exists("ymin")) ymin = 0.9
if (!exists("ymax")) ymax = 1.1
set datafile separator ","
set datafile commentschars "#"
set datafile missing "nan"
stats file using 1 nooutput
ncols = STATS_columns
ncon = (ncols - 1) / 2
if (strstrt(out, ".svg") > 0) { set terminal svg size 1000,600 } else { set terminal pngcairo size 1000,600 }
set output out
set xlabel "x = score - shift (base 2)"
set ylabel "output / 2^x"
set yrange [ymin:ymax]
set key below autotitle columnhead noenhanced
set grid
set style fill transparent solid 0.15 noborder
# bands: every input where the construction's output is NaN, Inf, negative or zero is drawn as a
# vertical impulse through the whole plot, in the construction's colour (subnormal outputs keep their ratio)
plot for [i=1:ncon] file using 1:(column(2*i+1) >= 1 && column(2*i+1) <= 4 ? ymax : 1/0) \
       with impulses lc i lw 1 notitle, \
     for [i=1:ncon] file using 1:(column(2*i)) with lines lc i lw 1.5 title columnhead(2*i)
