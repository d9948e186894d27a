# bench/plot.gp ARG1=pivot.tsv ARG2=out.png - each test's results as ratios
# to TCP loopback measured in the same run (log scale; 1 = TCP loopback).
set terminal pngcairo size 1100,560 font ",10"
set output ARG2
set datafile separator "\t"
set datafile missing "-"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 2
set yrange [0.25:64]
set ylabel "x better than TCP loopback (same run)"
set grid ytics
set key outside right top
set title "shunt vs baselines, 2-vCPU VM (higher is better; line = TCP loopback)"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5
plot ARG1 using 2:xtic(1) title columnhead(2), \
     '' using 3 title columnhead(3), '' using 4 title columnhead(4), \
     '' using 5 title columnhead(5), '' using 6 title columnhead(6)
