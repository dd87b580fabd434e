# attnacc: gnuplot script drawing output/2^x against x for each exp construction (whole range, and a zoom on four units of x), and below it the class of each construction's output (valid, subnormal, zero, negative, Inf, NaN) with its key.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Input: the CSV of `attnacc expmap ... --curve FILE` (columns x, then per construction: ratio, class;
# class 0 valid, 1 nan, 2 inf, 3 negative, 4 zero, 5 subnormal).
# Usage: gnuplot -e "file='curve.csv'; out='expratio.png'" plots/expratio.gp
#        (optional: ymin=0.9; ymax=1.1 to fix the ratio axis; zlo, zhi the zoom's x range; caption='...' a
#        provenance footer of caplines lines)
if (!exists("file")) file = 'curve.csv'
if (!exists("out")) out = 'expratio.png'
if (!exists("ymin")) ymin = 0.9
if (!exists("ymax")) ymax = 1.1
if (!exists("caption")) caption = ""
set datafile separator ","
set datafile commentschars "#"
set datafile missing "nan"
stats file using 1 nooutput
ncols = STATS_columns
ncon = (ncols - 1) / 2
xlo = STATS_min
xhi = STATS_max
# the zoom panel: the last four units of x up to 0 (four periods of the oscillation with the exponent's
# integer part; the full range shows ~140 of them as a solid band)
if (!exists("zlo")) zlo = (xhi < 0 ? xhi : 0) - 4
if (!exists("zhi")) zhi = zlo + 4
if (zlo < xlo) zlo = xlo
if (strstrt(out, ".svg") > 0) { set terminal svg size 1100,1040 dynamic font "sans,12" } else { set terminal pngcairo size 1100,1040 font "sans,11" }
set output out
colors = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf"
# the provenance footer inside the canvas (report.c wraps it into lines that fit the width)
if (!exists("caplines")) caplines = 1
set label 99 caption at screen 0.01, screen (6.0 + 13 * caplines) / 1040 left font ",8" noenhanced
set multiplot title "Exp constructions: output / 2^x against x, and where the output is not a normal number" noenhanced
# top: the ratio curves over the whole range; the legend above the panel, outside the data
set lmargin at screen 0.09
set rmargin at screen 0.84
set tmargin at screen 0.87
set bmargin at screen 0.64
set xrange [xlo:xhi]
set yrange [ymin:ymax]
set ylabel "output / 2^x" noenhanced
set format x "%g"
set grid
set key at screen 0.09, screen 0.945 left top Left reverse noenhanced autotitle columnhead
set object 1 rect from zlo, graph 0 to zhi, graph 1 fs empty border lc rgb "black" dt 2
set label 2 "zoom below" at zhi, graph 0.95 right offset -0.5, 0 font ",9"
plot for [i=1:ncon] file using 1:(column(2*i)) with lines lc rgb word(colors, i) lw 1.5 title sprintf("%d: ", i).columnhead(2*i)
unset object 1
unset label 2
unset label 99
# middle: the same curves on [zlo, zhi], where each period of the oscillation is seen
unset key
set tmargin at screen 0.59
set bmargin at screen 0.39
set xrange [zlo:zhi]
set autoscale y
set ylabel sprintf("output / 2^x, x in [%g, %g]", zlo, zhi) noenhanced
plot for [i=1:ncon] file using 1:(column(2*i)) with lines lc rgb word(colors, i) lw 1.5 notitle
unset label 99
# bottom: one strip per construction, coloured by the class of its output, with a key of the classes
set xrange [xlo:xhi]
set tmargin at screen 0.33
set bmargin at screen 0.11
set xlabel "x = score - shift (base 2)"
set ylabel "construction (number in the key)"
set yrange [0.5:ncon + 0.5]
set ytics 1
set grid noytics
set palette defined (0 "#e5f5e0", 1 "#d73027", 2 "#fc8d59", 3 "#7b3294", 4 "#636363", 5 "#74add1")
set palette maxcolors 6
set cbrange [-0.5:5.5]
set cbtics ("valid" 0, "NaN" 1, "Inf" 2, "negative" 3, "zero" 4, "subnormal" 5)
set colorbox user origin screen 0.86, screen 0.11 size screen 0.025, screen 0.22
plot for [i=1:ncon] file using 1:(i):(column(2*i+1)) with points pt 5 ps 2.2 lc palette notitle
unset multiplot
