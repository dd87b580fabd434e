# attnacc: gnuplot script: relative l2 error against sequence length for one output, one panel per mask and one row per recipe family.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Written for `attnacc report`, which sets these variables in a file loaded before this one
# (gnuplot vars.gp plots/table4.gp):
#   datafile  blocks separated by two blank lines, one per (row, mask, recipe): n, mean rel_l2 over seeds, max
#   nrows, nmasks, masks (mask names, space separated); panel p = (row - 1) * nmasks + mask index (1-based)
#   pb<p>, pc<p>  the block indices plotted in panel p and their colour slots (1..8)
#   key<r>, keyc<r>  the recipes of row r and their colour slots (the legend, right of the row)
#   ymin<r>, ymax<r>  the row's y range (whole decades); xmin, xmax the lengths run; xtics their positions
#   pubfile   lines "mask n value label row": published values at lengths inside [xmin, xmax], drawn in that row
#             (the row of the recipe modelling the kernel; "" when none)
#   rowname<r>  the recipe families of row r, in the panel titles
#   pubnote<r>  published values outside the plotted lengths whose recipe is in row r, under that row's legend
#   tensor ("o", "dq", ...), caption (provenance, \n-separated lines), caplines, out (.png or .svg)
if (!exists("caption")) caption = ""
if (!exists("caplines")) caplines = 1
W = 1400
H = 110 + 330 * nrows + 16 * caplines
if (strstrt(out, ".svg") > 0) { set terminal svg size W,H dynamic font "sans,13" } else { set terminal pngcairo size W,H font "sans,12" }
set output out
# Eight colours, point types, dash patterns and point sizes without repeats: a row never has more than eight
# recipes. Curves that coincide (a variant equal to its base on one output) stay visible: each later series is
# dashed, thinner, with smaller points of another shape (filled and open alternate), so the earlier one shows
# around it.
colors = "#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #17becf"
pts = "7 4 9 6 5 8 11 10"
do for [i=1:8] { set linetype i lc rgb word(colors, i) dt i pt (word(pts, i) + 0) ps (2.5 - 0.15 * i) lw (2.8 - 0.2 * i) }
foot = (20.0 + 16 * caplines) / H   # the provenance footer, inside the canvas
top = 1 - 45.0 / H                  # below the overall title
rowh = (top - foot) / nrows
left = 0.07
keyx = 0.80                         # the legend starts here, right of every panel: outside the data
gap = 0.05
colw = (keyx - 0.03 - left - (nmasks - 1) * gap) / nmasks
set logscale x 2
set logscale y 10
set format x "%.0f"
set format y "%.0e"
eval("set xtics (" . xtics . ")")
set mxtics 1
set grid xtics ytics mytics
set xrange [xmin / 1.25 : xmax * 1.25]
set tics noenhanced
set multiplot title sprintf("%s: relative l2 error against sequence length, BF16 inputs, errors against the MPFR oracle", tensor) noenhanced
set label 99 caption at screen 0.01, screen foot - 8.0 / H left font ",9" noenhanced
do for [r=1:nrows] {
  set yrange [value(sprintf("ymin%d", r)) : value(sprintf("ymax%d", r))]
  do for [m=1:nmasks] {
    p = (r - 1) * nmasks + m
    pb = value(sprintf("pb%d", p))
    pc = value(sprintf("pc%d", p))
    set lmargin at screen left + (m - 1) * (colw + gap)
    set rmargin at screen left + (m - 1) * (colw + gap) + colw
    set tmargin at screen top - (r - 1) * rowh - 0.035 * 1000 / H
    set bmargin at screen top - r * rowh + 0.075 * 1000 / H
    set title sprintf("%s (%s)", word(masks, m), value(sprintf("rowname%d", r))) noenhanced font ",11"
    set xlabel (r == nrows ? "sequence length n (tokens)" : "")
    set ylabel (m == 1 ? sprintf("rel. l2 error of %s", tensor) : "") noenhanced
    unset label 98
    pubnote = exists(sprintf("pubnote%d", r)) ? value(sprintf("pubnote%d", r)) : ""
    if (m == 1 && pubnote ne "") {
      # beside the row that holds the kernel's recipe, under its legend, outside the data
      set label 98 pubnote at screen keyx, screen top - r * rowh + 110.0 / H left font ",9" noenhanced
    }
    if (m == nmasks) {
      set key at screen keyx, screen top - (r - 1) * rowh - 0.035 * 1000 / H left top noenhanced Left reverse spacing 1.1
    } else {
      unset key
    }
    kt = value(sprintf("key%d", r))
    kc = value(sprintf("keyc%d", r))
    # the legend comes from invisible copies (NaN) so that it lists the row's recipes once, whatever panel has data
    if (pubfile ne "") {
      plot for [j=1:words(pb)] datafile index (word(pb, j) + 0) using 1:2 with linespoints lt (word(pc, j) + 0) notitle, \
           for [j=1:words(kt)] NaN with linespoints lt (word(kc, j) + 0) title word(kt, j), \
           NaN with points pt 6 ps 2.6 lw 2.5 lc rgb "black" title (m == nmasks ? "published" : ""), \
           pubfile using ((strcol(1) eq word(masks, m) && $5 == r) ? $2 : NaN):3 with points pt 6 ps 2.6 lw 2.5 lc rgb "black" notitle, \
           pubfile using ((strcol(1) eq word(masks, m) && $5 == r) ? $2 : NaN):3:4 with labels right offset -1.8,0 font ",9" notitle
    } else {
      plot for [j=1:words(pb)] datafile index (word(pb, j) + 0) using 1:2 with linespoints lt (word(pc, j) + 0) notitle, \
           for [j=1:words(kt)] NaN with linespoints lt (word(kc, j) + 0) title word(kt, j)
    }
    unset label 99
  }
}
unset multiplot
