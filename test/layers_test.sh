#!/bin/bash
#
# test/layers_test.sh: a test of test/layers.pl itself.
#
#   bash test/layers_test.sh [SRCDIR]	(after `make`; SRCDIR defaults to src)
#
# Copies the object files of SRCDIR and its src/layers.txt into a scratch
# directory, plants references into copies of real objects (a small C file
# compiled with $CC, merged into the object with `ld -r`, so that the file
# keeps every symbol it had), and checks what layers.pl says of each copy:
#
#   unchanged		passes
#   call up			a layer 0 file calls a function of the top layer's
#					window_am.c: reported as "calls up"
#   cycle			two files of one layer call each other: reported as a
#					cycle
#   const routine	a layer 1 file references a real const routine
#					(FbfCuckooRoutine) and one planted in window_am.c:
#					passes (a call through pointers)
#   writable routine	the same reference to a writable Fbf*Routine:
#					reported as "calls up"
#   const table		the same reference to a const table not named
#					Fbf*Routine: reported as "calls up"
#
# Exits 1 if layers.pl misses a planted problem or reports a non-problem.
#
set -u

src=${1:-src}
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fbf-layers.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
failures=0

if ! ls "$src"/window/*.o >/dev/null 2>&1; then
	echo "layers_test.sh: no object files under $src (run make first)" >&2
	exit 1
fi

# a fresh copy of the objects and the manifest in $scratch/src
fresh()
{
	rm -rf "$scratch/src"
	mkdir -p "$scratch/src"
	(cd "$src" && find . \( -name '*.o' -o -name layers.txt \) \
		-exec cp --parents -t "$scratch/src" {} +) ||
		{ echo "layers_test.sh: cannot copy $src" >&2; exit 1; }
}

# plant FILE.o C-SOURCE: merge the compiled source into the copy of FILE.o
plant()
{
	local obj=$scratch/src/$1 n=$RANDOM

	printf '%s\n' "$2" >"$scratch/plant$n.c"
	"$cc" -c -fPIC -O0 -w -o "$scratch/plant$n.o" "$scratch/plant$n.c" &&
		ld -r -o "$scratch/merged$n.o" "$obj" "$scratch/plant$n.o" &&
		mv "$scratch/merged$n.o" "$obj" ||
		{ echo "layers_test.sh: cannot plant into $1" >&2; exit 1; }
}

# a global function the object FILE.o defines
function_of()
{
	local f

	f=$(nm --defined-only -g "$scratch/src/$1" | awk '$2 == "T" { print $3; exit }')
	[ -n "$f" ] || { echo "layers_test.sh: $1 defines no function" >&2; exit 1; }
	echo "$f"
}

# expect NAME RC [PATTERN]: layers.pl on the copy exits RC, printing PATTERN
expect()
{
	local name=$1 want=$2 pattern=${3:-} out rc

	out=$(perl "$here/layers.pl" "$scratch/src" 2>&1)
	rc=$?
	if [ "$rc" -eq "$want" ] && { [ -z "$pattern" ] || grep -qF -- "$pattern" <<<"$out"; }; then
		echo "ok - $name"
	else
		echo "not ok - $name (exit $rc, wanted $want${pattern:+ and \"$pattern\"})"
		sed 's/^/    /' <<<"$out"
		failures=$((failures + 1))
	fi
}

fresh
expect "the objects as built pass" 0 "no cycle, no call up"

fresh
top=$(function_of window/window_am.o) || exit 1
plant window/window_layout.o "extern void $top(void); void fbf_planted_up(void) { $top(); }"
expect "a call from layer 0 to layer 5 is a call up" 1 \
	"calls up: window/window_layout.c (layer 0) -> window/window_am.c (layer 5) ($top)"

fresh
a=$(function_of window/window_options.o) || exit 1
b=$(function_of window/window_catalog.o) || exit 1
plant window/window_options.o "extern void $b(void); void fbf_planted_ab(void) { $b(); }"
plant window/window_catalog.o "extern void $a(void); void fbf_planted_ba(void) { $a(); }"
expect "two files of one layer calling each other are a cycle" 1 "cycle in window/:"

routine_def='void fbf_planted_fn(void) {}
struct planted { void (*fn)(void); };'
routine_ref='extern const char FbfCuckooRoutine[], NAME[];
const void *fbf_planted_ref(int i) { return i ? (const void *) FbfCuckooRoutine : (const void *) NAME; }'

fresh
plant window/window_am.o "$routine_def
const struct planted FbfPlantedRoutine = { fbf_planted_fn };"
plant window/window_page.o "${routine_ref//NAME/FbfPlantedRoutine}"
expect "a reference to a const routine is not an edge" 0 "FbfPlantedRoutine"

fresh
plant window/window_am.o "$routine_def
struct planted FbfPlantedRoutine = { fbf_planted_fn };"
plant window/window_page.o "${routine_ref//NAME/FbfPlantedRoutine}"
expect "a reference to a writable routine is a call up" 1 \
	"calls up: window/window_page.c (layer 1) -> window/window_am.c (layer 5) (FbfPlantedRoutine)"

fresh
plant window/window_am.o "$routine_def
const struct planted fbf_planted_table = { fbf_planted_fn };"
plant window/window_page.o "${routine_ref//NAME/fbf_planted_table}"
expect "a reference to a const table not named a routine is a call up" 1 \
	"calls up: window/window_page.c (layer 1) -> window/window_am.c (layer 5) (fbf_planted_table)"

if [ "$failures" -gt 0 ]; then
	echo "layers_test: $failures failure(s)"
	exit 1
fi
echo "layers_test: layers.pl finds every planted problem"
exit 0
