# attnacc: gnuplot script: relative l2 error against sequence length for one output tensor, one line per recipe and mask.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Written for `attnacc report`, which sets these variables in a file loaded before this one
# (gnuplot vars.gp plots/table4.gp), or set them with -e:
#   datafile  blocks separated by two blank lines, one per (recipe, mask): n, mean rel_l2 over seeds, max over seeds
#   nblocks   number of blocks;  titles: their names, space separated ("fa2/dense fa2/causal ...")
#   xtics     tic positions ("1024, 2048, ...");  tensor: the output ("o", "dq", "dk", "dv");  out: the image (.png or .svg)
#   caption   provenance (version, git hash, seeds, recipe hashes); pubfile: optional points n, value, label
if (!exists("pubfile")) pubfile = ""
if (!exists("caption")) caption = ""
if (strstrt(out, ".svg") > 0) { set terminal svg size 1100,720 dynamic font "sans,13" } else { set terminal pngcairo size 1100,720 font "sans,12" }
set output out
set logscale x 2
set logscale y 10
set format x "%.0f"
set format y "%.0e"
if (exists("xtics")) { eval("set xtics (" . xtics . ")") } else { set xtics 2 }
set mxtics 1
set grid xtics ytics mytics
set xlabel "sequence length n (tokens)"
set ylabel sprintf("relative l2 error of %s  (log scale)", tensor) noenhanced
set title sprintf("%s: relative l2 error against length, BF16 inputs (solid: dense, dashed: causal)", tensor) noenhanced
set key outside right top noenhanced spacing 1.0
set bmargin 9
# room for two key columns (14 recipes x 2 masks) right of the graph
set rmargin at screen 0.53
set label 1 caption at screen 0.01, screen 0.075 left font ",9" noenhanced
set offsets graph 0.03, graph 0.03, 0, 0
# one colour and point type per recipe; solid for dense, dashed for causal
colors = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf #7f7f7f #bcbd22"
do for [i=1:64] { set linetype i lc rgb word(colors, (i-1)/2 % 10 + 1) dt 1 + (i-1) % 2 pt ((i-1)/2 % 7 + 4) ps 1.2 lw 2 }
if (pubfile ne "") {
  plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints lt (i+1) title word(titles, i+1), \
       pubfile using 1:2 with points pt 7 ps 2 lc rgb "black" title "published ([blackwell-fa])", \
       pubfile using 1:2:3 with labels right offset -1.5,0 font ",10" notitle
} else {
  plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints lt (i+1) title word(titles, i+1)
}
