#!/usr/bin/env bash
# bench/rdma-plot.sh TSV PNG - an emulated RDMA table (bench/rdma.sh,
# bench/smc.sh, bench/rdma2.sh: test, variant, value, unit) as ratios to
# plain TCP over the same link in the same run: TCP's time / the variant's
# time, or the variant's rate (a unit per second) / TCP's (higher is
# better; 1 = TCP).  Rows without a TCP
# figure (setup to a new peer, RoCE packets) are left to the table.
set -euo pipefail
tsv=$1 png=$2 piv=$(mktemp)
awk -F'\t' 'NR > 1 {
	v[$1, $2] = $3; u[$1] = $4
	if (!($1 in st)) { st[$1] = 1; to[++n] = $1 }
	if (!($2 in sv)) { sv[$2] = 1; vo[++m] = $2 }
} END {
	for (i = 1; i <= n; i++) { # the rows and columns that have a ratio
		t = to[i]
		if (!((t, "tcp") in v) || v[t, "tcp"] <= 0 || u[t] == "packets") continue
		row[++r] = t
		for (j = 1; j <= m; j++)
			if (vo[j] != "tcp" && (t, vo[j]) in v && v[t, vo[j]] > 0) col[vo[j]] = 1
	}
	printf "test"
	for (j = 1; j <= m; j++) if (vo[j] in col) printf "\t%s", vo[j]
	print ""
	for (i = 1; i <= r; i++) {
		t = row[i]
		printf "%s", t
		for (j = 1; j <= m; j++) {
			x = vo[j]
			if (!(x in col)) continue
			if ((t, x) in v && v[t, x] > 0)
				printf "\t%.4f", u[t] ~ /\/s$/ ? v[t, x] / v[t, "tcp"] : v[t, "tcp"] / v[t, x]
			else
				printf "\t-"
		}
		print ""
	}
}' "$tsv" > "$piv"
cols=$(head -1 "$piv" | awk -F'\t' '{ print NF }')
gnuplot -e "set terminal pngcairo size 900,480 font ',10'; set output '$png';
	set datafile separator '\t'; set datafile missing '-';
	set style data histograms; set style histogram cluster gap 1;
	set style fill solid 0.85 border -1; set boxwidth 0.9;
	set logscale y 2; set yrange [0.01:8]; set grid ytics; set key top right;
	set ylabel 'x TCP over the same link (same run; higher is better)';
	set title 'Soft-RoCE under QEMU (emulated: relative cost, not hardware speed)';
	set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5;
	plot for [c=2:$cols] '$piv' using c:xtic(1) title columnhead(c)"
rm -f "$piv"
