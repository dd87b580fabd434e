# attnacc: gnuplot script: each variant's rel_l2 over its base's against sequence length, one panel per output (o, dq, dk, dv), mean over seeds with the min..max range as error bars.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Written for `attnacc report`, which sets these variables in a file loaded before this one:
#   datafile  blocks separated by two blank lines, output-major: block ((t - 1) * nser + j - 1) holds series j of
#             output t, lines "n mean lo hi" (NaN where the series has no cell)
#   nser      series per panel (variant x panel of the grid); title<j> their names
#   xmin, xmax, xtics  the lengths run; ymin, ymax  one y range for every panel
#   caption, caplines  the provenance footer; out (.png or .svg)
if (!exists("caption")) caption = ""
if (!exists("caplines")) caplines = 1
W = 1400
H = 120 + 2 * 330 + 16 * caplines
if (strstrt(out, ".svg") > 0) { set terminal svg size W,H dynamic font "sans,13" } else { set terminal pngcairo size W,H font "sans,12" }
set output out
colors = "#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #17becf"
pts = "7 4 9 6 5 8 11 10"
do for [i=1:8] { set linetype i lc rgb word(colors, i) dt i pt (word(pts, i) + 0) ps 1.4 lw 2 }
outs = "o dq dk dv"
foot = (20.0 + 16 * caplines) / H
top = 1 - 50.0 / H
rowh = (top - foot) / 2
set logscale x 2
set format x "%.0f"
eval("set xtics (" . xtics . ")")
set xrange [xmin / 1.25 : xmax * 1.25]
set yrange [ymin : ymax]
set grid
set tics noenhanced
set multiplot title "rel_l2 of each variant over its base on the same inputs (below 1: more accurate); bars: min..max over seeds" noenhanced
set label 99 caption at screen 0.01, screen foot - 8.0 / H left font ",9" noenhanced
do for [t=1:4] {
  r = (t - 1) / 2
  c = (t - 1) % 2
  set lmargin at screen 0.06 + c * 0.35
  set rmargin at screen 0.06 + c * 0.35 + 0.30
  set tmargin at screen top - r * rowh - 30.0 / H
  set bmargin at screen top - (r + 1) * rowh + 60.0 / H
  set title word(outs, t) noenhanced
  set xlabel (r == 1 ? "sequence length n (tokens)" : "")
  set ylabel (c == 0 ? "variant / base rel_l2" : "") noenhanced
  if (t == 2) { set key at screen 0.73, screen top - 30.0 / H left top noenhanced Left reverse spacing 1.2 font ",10" samplen 3 } else { unset key }
  plot 1 with lines lc rgb "black" dt 3 lw 1 notitle, \
       for [j=1:nser] datafile index ((t - 1) * nser + j - 1) using 1:2:3:4 with yerrorlines lt ((j - 1) % 8 + 1) \
         title value(sprintf("title%d", j))
  unset label 99
}
unset multiplot
