# shellcheck shell=bash
# bench/bars.sh - sourced: bars OUT TITLE YLABEL EXTRA VARIANT... draws
# OUT.png from OUT.tsv (column 2 the variant, column 4 the value, column 1
# the group on the x axis): one bar per variant in each group, EXTRA added
# to the plot command (", 1 notitle lw 2": a line at TCP's ratio).  Nothing
# without gnuplot.
bars() {
	local out=$1 title=$2 ylabel=$3 extra=$4 plots="" col v
	shift 4
	command -v gnuplot > /dev/null || return 0
	for v in "$@"; do
		col=$([ -z "$plots" ] && echo "4:xtic(1)" || echo 4)
		plots+="${plots:+, }'< awk -F\"\t\" \"NR>1 && \\\$2==\\\"$v\\\"\" $out.tsv' using $col title '$v'"
	done
	gnuplot -e "set terminal pngcairo size 800,480; set output '$out.png'; set datafile separator '\t';
		set title '$title';
		set style data histogram; set style histogram cluster gap 1; set style fill solid 0.8;
		set ylabel '$ylabel'; set yrange [0:*]; set grid ytics; set key top left;
		plot $plots$extra"
}
