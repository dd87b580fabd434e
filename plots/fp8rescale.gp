# attnacc: gnuplot script drawing the fp8-rescale experiment: Pearson of o, the largest P x 2^offset before its e4m3 cast, and the saturated fraction, against the logit std, one curve per recipe.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Input: results.csv of `attnacc sweep --experiment fp8-rescale` (columns by name: logit_std, recipe, pearson,
# p_max, p_over_fraction; one n and seed).
# Usage: gnuplot -e "file='results/fp8-rescale/results.csv'; out='fp8rescale.png'" plots/fp8rescale.gp
#        (optional: caption='...' a provenance footer)
if (!exists("file")) file = 'results.csv'
if (!exists("out")) out = 'fp8rescale.png'
if (!exists("caption")) caption = ""
if (!exists("caplines")) caplines = 1
set datafile separator ","
set datafile columnheaders
if (strstrt(out, ".svg") > 0) { set terminal svg size 1500,560 dynamic font "sans,12" } else { set terminal pngcairo size 1500,560 font "sans,11" }
set output out
set label 99 caption at screen 0.01, screen 0.01 + 0.02 * caplines left font ",8" noenhanced
set bmargin 5
names = "stock-4 fix-0.75 offset4-4 head-0"
titles = "'thr 4, off 8 (b65ae6b1)' 'thr 0.75 (4f3b9be2)' 'thr 4, off 4 (2409214a)' 'thr 0, off 8 (0251105a)'"
colors = "#d62728 #1f77b4 #2ca02c #7f7f7f"
# the header and the rows of recipe k (awk finds the recipe column by name), so each curve is one unbroken line
rows(k) = sprintf("< awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"recipe\") c = i } NR == 1 || $c == \"%s\"' '%s'", word(names, k), file)
set multiplot layout 1,3 title "FA4 FP8 forward (fa4-fp8, emulated): stale running max against e4m3's 448" noenhanced
set logscale x
set xrange [0.08:6.5]
set xlabel "logit std"
set key bottom left font ",8" noenhanced
set grid
set ylabel "Pearson(o, exact on the quantised inputs)"
set yrange [*:1.0005]
plot for [k=1:4] rows(k) using "logit_std":"pearson" with linespoints lw 2 pt 7 lc rgb word(colors, k) title word(titles, k), \
     0.999 with lines dt 2 lc rgb "black" title "test rule 0.999"
set logscale y 2
set yrange [*:*]
set ylabel "max of P x 2^offset before the e4m3 cast" noenhanced
set key top left
plot for [k=1:4] rows(k) using "logit_std":"p_max" with linespoints lw 2 pt 7 lc rgb word(colors, k) notitle, \
     448 with lines dt 2 lc rgb "black" title "e4m3 max 448", 4096 with lines dt 3 lc rgb "#d62728" title "4096 = 2^12" noenhanced
unset logscale y
set ylabel "fraction of P casts saturated (> 448)"
plot for [k=1:4] rows(k) using "logit_std":"p_over_fraction" with linespoints lw 2 pt 7 lc rgb word(colors, k) notitle
unset multiplot
