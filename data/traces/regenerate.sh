#!/bin/sh
# Regenerates the recorded traces in this directory (see README.md).
# Usage: data/traces/regenerate.sh [PMLAB]   (run from the repository root;
#        PMLAB defaults to target/release/pmlab)
# Longer traces for the full Kessler-Hill run: OUT=DIR COUNT=N data/traces/regenerate.sh
#        records N references per program (default 5000000) into DIR (default this one);
#        LEVEL=N sets the zstd level (default 19; 3 records long traces much faster).
set -eu
PMLAB=$(realpath "${1:-target/release/pmlab}")
OUT=$(realpath -m "${OUT:-$(pwd)/data/traces}")
COUNT=${COUNT:-5000000}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CC1=$(gcc -print-prog-name=cc1)
export LC_ALL=C

python3 "$(dirname "$0")/gen_inputs.py" 1990 "$WORK"

# rec NAME SKIP COUNT CMD...: skip SKIP references of start-up, keep COUNT.
rec() {
    name=$1 skip=$2 count=$3
    shift 3
    (cd "$WORK" && "$PMLAB" trace record --skip-refs "$skip" --max-refs "$count" \
        -o "$OUT/$name.bin.zst" --level "${LEVEL:-19}" -- "$@")
}

rec cc1  30000000 "$COUNT" "$CC1" -quiet -O2 prog.c -o prog.s
rec xz    3000000 "$COUNT" xz -6 -T1 -c text.txt
rec sort  3000000 "$COUNT" sort --parallel=1 -S 64M text.txt
rec awk   3000000 "$COUNT" awk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) print w, n[w] }' text.txt
rec perl  6000000 "$COUNT" perl -ne 'for (split) { $n{$_}++; $l{length $_}++ } END { print "$_ $n{$_}\n" for sort keys %n }' text.txt
rec diff  3000000 "$COUNT" diff text.txt text2.txt
