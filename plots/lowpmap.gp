# attnacc: gnuplot script drawing the lowpmap experiment: rel_l2 of o, the saturated and the underflowed fractions of the P casts, one column per map, one curve per recipe.
# SPDX-License-Identifier: LGPL-3.0-or-later
# Input: results.csv of `attnacc sweep --experiment lowpmap` (columns by name: map, x, recipe, rel_l2_o,
# over_fraction, under_fraction; the pcast map is drawn by plots/lowpcast.gp). Several seeds: one point each.
# Usage: gnuplot -e "file='results/lowpmap/results.csv'; out='lowpmap.png'" plots/lowpmap.gp
#        (optional: caption='...' a provenance footer of caplines lines)
if (!exists("file")) file = 'results.csv'
if (!exists("out")) out = 'lowpmap.png'
if (!exists("caption")) caption = ""
if (!exists("caplines")) caplines = 1
set datafile separator ","
set datafile columnheaders
if (strstrt(out, ".svg") > 0) { set terminal svg size 2100,1060 dynamic font "sans,12" } else { set terminal pngcairo size 2100,1060 font "sans,11" }
set output out
set label 99 caption at screen 0.01, screen 0.004 + 0.012 * caplines left font ",8" noenhanced
# the column index of a header name, and the distinct values of a column in file order (awk; no commas in them)
col(n) = sprintf("c = 0; for (i = 1; i <= NF; i++) if ($i == \"%s\") c = i", n)
values(n, extra) = system(sprintf("awk -F, 'NR == 1 { %s; next } %s { if (!s[$c]++) printf \"%%s \", $c }' '%s'", col(n), extra, file))
allmaps = "std outlier sink lsink tile qblock kvmod"
maps = ""
present = values("map", "1")
do for [m in allmaps] { if (strstrt(" ".present, " ".m." ") > 0) { maps = maps.m." " } }
recipes = values("recipe", "$0 !~ /pcast/")
# a recipe's colour is its base's (the part before "/": the lsink map's NAME/open and NAME/end), its dash the suffix
bases = values("recipe", "$0 !~ /pcast/ && $0 !~ /\\//")
base(w) = strstrt(w, "/") ? w[1:strstrt(w, "/") - 1] : w
bindex(w) = sum [i = 1:words(bases)] (word(bases, i) eq base(w) ? i : 0)
kcolor(k) = word(colors, 1 + (bindex(word(recipes, k)) + 7) % 8)
kdash(k) = strstrt(word(recipes, k), "/end") ? 2 : 1
nm = words(maps)
nr = words(recipes)
colors = "#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf"
xlab(m) = m eq "std" ? "logit std" : m eq "outlier" ? "factor on the norm of 4 keys" : m eq "sink" ? \
          "logit added to key 0 (sink token)" : m eq "lsink" ? "learned sink logit" : m eq "tile" ? "fwd.tile_k" : \
          m eq "qblock" ? "quant.block" : m eq "kvmod" ? "X in n_k = 4 tile_k + X" : m
# the rows of map m and recipe k, header kept, so each curve is one line
rows(m, k) = sprintf("< awk -F, 'NR == 1 { %s; %s; print; next } $c == \"%s\" && $r == \"%s\"' '%s'", col("map"), \
                     "r = 0; for (i = 1; i <= NF; i++) if ($i == \"recipe\") r = i", m, word(recipes, k), file)
set multiplot layout 3, nm title "FP8 attention maps (emulated; exact-fp64 on the same BF16 inputs is the reference)" noenhanced
set grid
set bmargin 5
set key top left font ",8" noenhanced
xlog(m) = m eq "std" || m eq "outlier" || m eq "qblock"
do for [j = 1:nm] {
  m = word(maps, j)
  set xlabel xlab(m) noenhanced
  if (xlog(m)) { set logscale x 2 } else { unset logscale x }
  set logscale y
  set yrange [1e-3:2]
  set format y "%.0e"
  set ylabel (j == 1 ? "rel_l2(o)" : "") noenhanced
  set title m noenhanced
  plot for [k = 1:nr] rows(m, k) using "x":"rel_l2_o" with linespoints lw 2 pt (4 + 2 * bindex(word(recipes, k))) ps 1.2 dt kdash(k) lc rgb kcolor(k) title word(recipes, k)
}
xlog(m) = m eq "std" || m eq "outlier" || m eq "qblock"
do for [j = 1:nm] {
  m = word(maps, j)
  set xlabel xlab(m) noenhanced
  if (xlog(m)) { set logscale x 2 } else { unset logscale x }
  unset logscale y
  set yrange [0:*]
  set format y "%g"
  set ylabel (j == 1 ? "fraction of P casts saturated (> max)" : "") noenhanced
  unset title
  plot for [k = 1:nr] rows(m, k) using "x":"over_fraction" with linespoints lw 2 pt (4 + 2 * bindex(word(recipes, k))) ps 1.2 dt kdash(k) lc rgb kcolor(k) notitle
}
xlog(m) = m eq "std" || m eq "outlier" || m eq "qblock"
do for [j = 1:nm] {
  m = word(maps, j)
  set xlabel xlab(m) noenhanced
  if (xlog(m)) { set logscale x 2 } else { unset logscale x }
  set ylabel (j == 1 ? "fraction of P casts underflowed (to 0)" : "") noenhanced
  plot for [k = 1:nr] rows(m, k) using "x":"under_fraction" with linespoints lw 2 pt (4 + 2 * bindex(word(recipes, k))) ps 1.2 dt kdash(k) lc rgb kcolor(k) notitle
}
unset multiplot
