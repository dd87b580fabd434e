# attnacc: gnuplot script drawing the lowpmap experiment's pcast map: MSE of o and the underflowed fraction of the P casts against a sink token's logit, forward against reverse key-block order, P x 2^0 against 2^8, one column per recipe.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Input: results.csv of `attnacc sweep --experiment lowpmap --maps pcast` (columns by name: map, x, recipe,
# mse_o, under_fraction; recipes named BASE/fwd-0, BASE/rev-0, BASE/fwd-8, BASE/rev-8). Several seeds: one
# point each.
# Usage: gnuplot -e "file='results/lowpmap/results.csv'; out='lowpcast.png'" plots/lowpcast.gp
#        (optional: caption='...' a provenance footer of caplines lines)
if (!exists("file")) file = 'results.csv'
if (!exists("out")) out = 'lowpcast.png'
if (!exists("caption")) caption = ""
if (!exists("caplines")) caplines = 1
set datafile separator ","
set datafile columnheaders
# the recipes of the pcast rows without their /way suffix, in file order
bases = system(sprintf("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == \"map\") m = i; if ($i == \"recipe\") r = i }; next } $m == \"pcast\" { b = $r; sub(/\\/.*/, \"\", b); if (!s[b]++) printf \"%%s \", b }' '%s'", file))
nb = words(bases)
if (strstrt(out, ".svg") > 0) { set terminal svg size (420 * nb + 200),760 dynamic font "sans,12" } else { set terminal pngcairo size (420 * nb + 200),760 font "sans,11" }
set output out
set label 99 caption at screen 0.01, screen 0.01 + 0.012 * caplines left font ",8" noenhanced
ways = "fwd-0 rev-0 fwd-8 rev-8"
titles = "'forward, P x 1' 'reverse, P x 1' 'forward, P x 2^8' 'reverse, P x 2^8'"
colors = "#d62728 #1f77b4 #ff7f0e #2ca02c"
rows(b, w) = sprintf("< awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == \"map\") m = i; if ($i == \"recipe\") r = i }; print; next } $m == \"pcast\" && $r == \"%s/%s\"' '%s'", b, w, file)
set multiplot layout 2, nb title "P cast under a sink token (arXiv 2606.06521): key blocks first-to-last (forward) or last-to-first (reverse); Q, K, V in BF16, P alone in e4m3" noenhanced
set grid
set bmargin 4 + caplines
set key bottom left font ",8" noenhanced
set xlabel "logit added to key 0 (sink token)"
do for [j = 1:nb] {
  b = word(bases, j)
  set title b noenhanced
  set logscale y
  set format y "%.0e"
  set ylabel (j == 1 ? "MSE(o) against exact" : "") noenhanced
  plot for [k = 1:4] rows(b, word(ways, k)) using "x":"mse_o" with linespoints lw 2 pt (4 + 2 * k) dt k lc rgb word(colors, k) title (j == 1 ? word(titles, k) : "")
}
do for [j = 1:nb] {
  b = word(bases, j)
  unset title
  unset logscale y
  set format y "%g"
  set yrange [0:1]
  set ylabel (j == 1 ? "fraction of P casts underflowed (to 0)" : "") noenhanced
  plot for [k = 1:4] rows(b, word(ways, k)) using "x":"under_fraction" with linespoints lw 2 pt (4 + 2 * k) dt k lc rgb word(colors, k) notitle
}
unset multiplot
