# attnacc: gnuplot script: fixed-point dQ budget map from `attnacc dq-budget` (fallback fraction and added error against the scale exponent).
# SPDX-License-Identifier: LGPL-3.0-or-later
# Usage: gnuplot -e "csv='DIR/results.csv'; out='plots/dqbudget.png'" plots/dqbudget.gp
# Optional: sigma (default 1), ns (lengths, default "1024 2048 4096 8192 16384 32768"), d, thr (safe error line, 1e-3), caption.
# Columns are found by name in the CSV header (mask, sigma, n, scale_exp, fail_frac, red_rel_l2), so new
# settings columns do not move them; sel() prints scale_exp, fail_frac, red_rel_l2 of the selected rows.
if (!exists("sigma")) sigma = "1"
if (!exists("ns")) ns = "1024 2048 4096 8192 16384 32768"
if (!exists("caption")) caption = ""
if (!exists("d")) d = "128"
if (!exists("thr")) thr = 1e-3
if (strstrt(out, ".svg") > 0) { set terminal svg size 1300,640 dynamic font "sans,12" } else { set terminal pngcairo size 1300,640 font "sans,11" }
set output out
set datafile separator ","
sel(mask, n) = sprintf("< awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i;next} $c[\"mask\"]==\"%s\" && $c[\"sigma\"]==\"%s\" && $c[\"n\"]==\"%s\"{print $c[\"scale_exp\"] \",\" $c[\"fail_frac\"] \",\" $c[\"red_rel_l2\"]}' '%s'", mask, sigma, n, csv)
do for [i=1:16] { set linetype i lc i dt 1 pt 7 ps 0.9 lw 2 }
do for [i=17:32] { set linetype i lc (i-16) dt 2 pt 6 ps 0.9 lw 2 }
set multiplot layout 1,2 title sprintf("fixed-point dQ (16-bit packed words), inputs %s*N(0,1) bf16, d = %s: solid dense, dashed causal", sigma, d) noenhanced
set xlabel "scale exponent s (partial x -> rne(x 2^s))" noenhanced
set grid
set key top left noenhanced font ",9"
set ylabel "fraction of dQ tiles failing the budget (FP64 recompute)"
set yrange [-0.02:1.02]
plot for [i=1:words(ns)] sel("dense", word(ns, i)) using 1:2 with linespoints lt i title sprintf("dense n=%s", word(ns, i)), \
     for [i=1:words(ns)] sel("causal", word(ns, i)) using 1:2 with linespoints lt (i+16) title sprintf("causal n=%s", word(ns, i))
set ylabel "rel. l2 of the reduced FP32 dQ accumulator vs FP32 ordered sum"
set logscale y 10
set format y "%.0e"
set yrange [*:*]
set label 1 caption at screen 0.01, screen 0.02 left font ",8" noenhanced
set arrow 1 from graph 0, first thr to graph 1, first thr nohead dt 3 lw 2 lc rgb "black"
set label 2 sprintf("safe threshold %g", thr) at graph 0.98, first thr*1.3 right font ",9" noenhanced
plot for [i=1:words(ns)] sel("dense", word(ns, i)) using 1:($3 > 0 ? $3 : 1/0) with linespoints lt i notitle, \
     for [i=1:words(ns)] sel("causal", word(ns, i)) using 1:($3 > 0 ? $3 : 1/0) with linespoints lt (i+16) notitle
unset multiplot
