# models.tsv's pins column as command-line options, in one place for every
# script that reads the list (sourced: tests/models/check, tests/cuda/check,
# tests/report/check, bench/run, bench/llvm, bench/memory, scripts/golden).
#
# pin_args_for PINS FLAG: the array pin_args gets each NAME=DIMS item of
# PINS (comma-separated, or - for none) after FLAG: --input-shape for
# modelc, --pin for reference.js. A fill:NAME=VALUE item is the value of
# an input, not its shape: reference.js gets it as --fill NAME=VALUE
# (FLAG --pin), modelc not at all.
pin_args_for() {
	local pins=$1 flag=$2 p x
	pin_args=()
	if [ -z "$pins" ] || [ "$pins" = - ]; then return 0; fi
	IFS=, read -ra p <<<"$pins"
	for x in "${p[@]}"; do
		case $x in
		fill:*) [ "$flag" != --pin ] || pin_args+=(--fill "${x#fill:}") ;;
		*) pin_args+=("$flag" "$x") ;;
		esac
	done
}
