#!/bin/sh
# Records the Mult2-like multiprogrammed workload of the Kessler & Hill reproduction
# (see README.md in this directory): one trace per process, and the manifest mult2.tsv
# that says which job stream each process belongs to.
#
# Setup (Debian 12), once:
#   apt-get install valgrind tcc magic qrouter binutils gcc coreutils diffutils mawk \
#       guile-3.0 ngspice python3
# Usage (from the repository root):
#   cargo build --release -p pmlab
#   data/mult2/generate.sh [PMLAB]                    # the quick set, into data/mult2/quick
#   SCALE=full OUT=mult2-full data/mult2/generate.sh  # the full run's set
# PMLAB defaults to target/release/pmlab; LEVEL=N sets the zstd level (default 12).
set -eu
PMLAB=$(realpath "${1:-target/release/pmlab}")
HERE=$(cd "$(dirname "$0")" && pwd)
SCALE=${SCALE:-quick}
OUT=$(realpath -m "${OUT:-$HERE/$SCALE}")
LEVEL=${LEVEL:-12}
case $SCALE in
    # references recorded of each long program, and the start-up skipped before them
    # COMPILES files are compiled, LINK says whether they are linked, the first COMMANDS
    # UNIX commands of the list are run, APPX references are recorded of each Appendix A
    # program.
    quick) LONG=6000000 SKIP=5000000 COMPILES=1 LINK=no COMMANDS=12 APPX=3000000 ;;
    full) LONG=40000000 SKIP=20000000 COMPILES=6 LINK=yes COMMANDS=99 APPX=30000000 ;;
    *) echo "SCALE must be quick or full" >&2; exit 2 ;;
esac
for tool in valgrind tcc magic qrouter as ld gcc guile ngspice python3; do
    command -v $tool >/dev/null || {
        echo "$tool missing: apt-get install valgrind tcc magic qrouter binutils gcc guile-3.0 ngspice python3" >&2
        exit 1
    }
done
# valgrind follows no exec, so the real binaries are run, not their wrapper scripts.
QROUTER=/usr/lib/qrouter/qrouternullg
MAGIC=/usr/lib/x86_64-linux-gnu/magic/tcl/magicdnull
export QROUTER_LIB_DIR=/usr/lib/qrouter
mkdir -p "$OUT"
rm -f "$OUT"/*.bin.zst
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C
python3 "$HERE/gen_inputs.py" 1990 "$WORK" "$SCALE"
cat > "$WORK/route.tcl" <<'TCL'
read_lef tech.lef
read_def chip.def
stage1
stage2
quit
TCL
cat > "$WORK/drc.tcl" <<'TCL'
load chip
select top cell
drc check
drc catchup
puts "DRC errors: [drc list count total]"
quit -noprompt
TCL

MANIFEST="$OUT/mult2.tsv"
printf '# stream\trole\ttrace\tcommand\n' > "$MANIFEST"
# rec STREAM ROLE NAME SKIP COUNT CMD...: record CMD (COUNT 0: the whole process) into
# NAME.bin.zst and list it in the manifest.
rec() {
    stream=$1 role=$2 name=$3 skip=$4 count=$5
    shift 5
    if [ "$count" -gt 0 ]; then limit="--max-refs $count"; else limit=""; fi
    # shellcheck disable=SC2086
    (cd "$WORK" && "$PMLAB" trace record --skip-refs "$skip" $limit \
        -o "$OUT/$name.bin.zst" --level "$LEVEL" -- "$@" 2>>"$WORK/stderr.log")
    printf '%s\t%s\t%s\t%s\n' "$stream" "$role" "$name.bin.zst" "$*" >> "$MANIFEST"
}

# The two long, large programs: a detail maze router and a design-rule checker (the
# paper's printed-circuit-board router and VLSI design rule checker), running from before
# the trace starts to its end.
rec router long router "$SKIP" "$LONG" "$QROUTER" -- -nog -noc -s route.tcl
rec drc long drc "$SKIP" "$LONG" "$MAGIC" -nowrapper -dnull -noconsole -T scmos drc.tcl

# A series of compiles: per file the preprocessor, the compiler and the assembler, each a
# process of its own (tcc preprocesses and compiles; GNU as assembles the assembly gcc
# writes for the same file, untraced), and a final relocatable link.
for src in $(ls "$WORK"/src/*.c | head -n "$COMPILES"); do
    f=$(basename "$src" .c)
    gcc -O1 -S "$src" -o "$WORK/$f.s" 2>/dev/null
    rec compile series "cpp-$f" 0 0 tcc -E "src/$f.c" -o "$f.i"
    rec compile series "cc-$f" 0 0 tcc -c "$f.i" -o "$f.o"
    rec compile series "as-$f" 0 0 as -o "$f.as.o" "$f.s"
done
if [ "$LINK" = yes ]; then
    # shellcheck disable=SC2046
    rec compile series ld 0 0 ld -r -o all.o $(cd "$WORK" && ls -- *.as.o)
fi

# A series of simple UNIX commands (words split on blanks, no globbing).
set -f
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    [ "$n" -le "$COMMANDS" ] || break
    # shellcheck disable=SC2086
    rec shell series "$(printf 'sh-%02d-%s' $n "${cmd%% *}")" 0 0 $cmd
done <<'CMDS'
wc -l small.txt
grep -c stika small.txt
sed -n 100,400p small.txt
head -n 2000 small.txt
cut -c1-20 small.txt
uniq -c small.txt
tail -n 1000 small.txt
cmp small.txt text.txt
md5sum small.txt
nl small.txt
ls -l src
fold -w 40 small.txt
sort small.txt
paste small.txt small.txt
find src -name f0?.c
awk {n+=NF}END{print(n)} small.txt
du -a src
expand small.txt
date
CMDS
set +f

# Appendix A: single large programs standing in for the paper's Sor, Tv, Tree and Lin.
mkdir -p "$OUT/appendix"
rm -f "$OUT"/appendix/*.bin.zst
gcc -O2 -o "$WORK/sor" "$WORK/sor.c"
# appendix NAME SKIP CMD...: record a slice of APPX references after SKIP.
appendix() {
    name=$1 skip=$2
    shift 2
    (cd "$WORK" && "$PMLAB" trace record --skip-refs "$skip" --max-refs "$APPX" \
        -o "$OUT/appendix/$name.bin.zst" --level "$LEVEL" -- "$@" 2>>"$WORK/stderr.log")
}
appendix sor 5000000 ./sor "$(cat "$WORK/sor.n")" 50
appendix tv 5000000 ngspice -b tv.cir
# Guile's JIT is off so that valgrind sees no generated code.
export GUILE_JIT_THRESHOLD=-1
appendix tree 40000000 guile --no-auto-compile tree.scm
appendix lin 5000000 ngspice -b lin.cir

for f in "$OUT"/*.bin.zst "$OUT"/appendix/*.bin.zst; do
    printf '%s: ' "$(basename "$f")"
    "$PMLAB" trace info "$f" | grep -E 'references|footprint' | tr -s ' ' | tr '\n' ' '
    echo
done
echo "recorded $(grep -vc '^#' "$MANIFEST") processes into $OUT"
