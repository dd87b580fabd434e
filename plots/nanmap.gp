# attnacc: gnuplot script: heatmap of where each recipe's outputs pass, fail the rule, overflow to Inf or turn NaN,
# SPDX-License-Identifier: LGPL-3.0-or-later
# over input scale sigma (columns) and recipe x length (rows), one panel per mask.
# Written for `attnacc report`, which sets these variables in a file loaded before this one:
#   datafile  blocks (one per panel, two blank lines apart) of lines: x index, y index, class
#             (0 pass, 1 finite but fails |a-b| <= 0.01 + 0.01|b|, 2 Inf, 3 NaN, 4 recipe refused the input)
#   ovfile    same blocks: x, y of cells where the exact result itself overflows BF16 (marked R)
#   npanels, panels (space-separated panel titles), xtic and ytic (tic definitions "label" index, ...)
#   nx, ny (grid size), out (.png or .svg), caption (provenance, \n-separated lines), caplines (their number)
#   xname (optional): the x axis's title; other than "log2 sigma" when the columns are conditions (sigma with the
#             nanmap map axes: distribution, logit offset, fully masked row), whose longer labels get more room
if (!exists("caption")) caption = ""
if (!exists("caplines")) caplines = 2
if (!exists("xname")) xname = "log2 sigma"
room = (xname eq "log2 sigma") ? 110 : 200
H = 860 + 16 * caplines + room - 110
if (strstrt(out, ".svg") > 0) { set terminal svg size 1400,H dynamic font "sans,12" } else { set terminal pngcairo size 1400,H font "sans,11" }
set output out
set palette defined (0 "#1a9850", 1 "#fee08b", 2 "#fc8d59", 3 "#d73027", 4 "#878787")
set palette maxcolors 5
set cbrange [-0.5:4.5]
set cbtics ("pass" 0, "fails rule" 1, "Inf" 2, "NaN" 3, "refused" 4)
set xrange [-0.5:nx-0.5]
set yrange [-0.5:ny-0.5]
eval("set xtics (" . xtic . ") rotate by 90 right font ',9'")
eval("set ytics (" . ytic . ") font ',9'")
set xlabel xname noenhanced
set tics noenhanced
# the provenance footer inside the canvas, below the x labels
set label 1 caption at screen 0.01, screen (16.0 * caplines) / H left font ",9" noenhanced
set multiplot title "NaN / Inf / overflow map: inputs sigma * N(0,1) rounded to BF16 (R: the exact result overflows BF16)" noenhanced
# panels placed by hand: the recipe labels left of the first, the colour key right of the last, outside the data
left = 0.13
right = 0.86
gap = 0.02
pw = (right - left - (npanels - 1) * gap) / npanels
set bmargin at screen (16.0 * caplines + room) / H
set tmargin at screen 1 - 75.0 / H
set colorbox user origin screen 0.885, screen (16.0 * caplines + room) / H size screen 0.02, screen 0.6
do for [p=0:npanels-1] {
  set title word(panels, p+1) noenhanced
  set lmargin at screen left + p * (pw + gap)
  set rmargin at screen left + p * (pw + gap) + pw
  if (p > 0) { unset ytics }
  if (p < npanels - 1) { unset colorbox } else { set colorbox }
  plot datafile index p using 1:2:3 with image notitle, \
       ovfile index p using 1:2:("R") with labels font ",9" tc rgb "black" notitle
  unset label 1
}
unset multiplot
