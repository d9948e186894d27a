# bench/plot.gp - docs/bench/results.png from docs/bench/results.tsv:
# each test's result as a ratio to TCP loopback in the same run (log scale).
set terminal pngcairo size 1100,560 font ",10"
set output ARG2
set datafile separator "\t"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set logscale y 2
set yrange [0.05:64]
set ylabel "x better than TCP loopback (same run)"
set grid ytics
set xtics rotate by -25
set key outside right top
set title "shunt vs baselines on a 2-vCPU VM (higher is better; 1 = TCP loopback)"
plot for [v in "unix-socket shunt-no-spin shunt-default shunt-busy-poll raw-shm"] \
     ARG1 using (strcol(2) eq v ? $5 : 1/0):xtic(1) title v
