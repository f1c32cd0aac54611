#!/usr/bin/env bash
# lint.sh — the habits of the field, checked: each tool's findings with the
# file and line, and a closing count.  With --fix (./pgcipher fmt), fix what
# a formatter can fix, then check again.
#
#   Go      proxy/: gofmt -l empty; go mod tidy leaves go.mod and go.sum as
#           they are; go vet; staticcheck (pinned)
#   C       our own C files (server/src, columns/src and columns' tests) as
#           PostgreSQL's pgindent formats them, with pg_bsd_indent from the
#           pinned source tree and upstream's typedefs.list plus ours
#           (extracted from our files); upstream files' hunks are left as
#           the patches have them
#   Shell   shellcheck, every finding fixed or annotated with why
#   Python  ruff check and ruff format --check over bench/, scripts/, test/vendor/, test/packages/,
#           proxy/test/orm/ and proxy/test/drivers/
#           (ruff.toml; ruff pinned in scripts/lint-requirements.txt)
#   Perl    our TAP files and modules as perltidy formats them with
#           PostgreSQL's src/tools/pgindent/perltidyrc (Debian's perltidy)
#   Git     commit subjects of at most 72 characters, from eebf338 on
#
# Usage: scripts/lint.sh [--fix]   (PGCIPHER_TOP, PGCIPHER_BUILD as for test.sh;
#                                   needs the source tree build.sh unpacks)
set -uo pipefail
shopt -s lastpipe	# findings counted in this shell, at the end of pipelines
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
fix=${1:-}
tools=$build/postgresql/src/tools
cd "$top" || exit 1
# the checkout may belong to another user than the one who runs the tests
git() { command git -c safe.directory="$top" "$@"; }
# the files git tracks, and the new ones it does not ignore
our_files() { git ls-files --cached --others --exclude-standard "$@"; }

problems=0
finding() { echo "$*"; problems=$((problems + 1)); }
# one finding per line of a tool's output
findings() { local line; while IFS= read -r line; do [ -n "$line" ] && finding "$line"; done; }
section() { echo "== $*"; }

# --- Go ----------------------------------------------------------------
go=$("$top/scripts/go.sh" path) || exit 1
gofmt=$(dirname "$go")/gofmt
section "go: gofmt, go mod tidy, go vet, staticcheck (proxy/)"
if [ "$fix" = --fix ]; then
    (cd proxy && "$gofmt" -w . && "$go" mod tidy)
fi
(cd proxy && "$gofmt" -l .) | sed 's|^|proxy/|; s|$|:1: gofmt: not formatted (./pgcipher fmt)|' | findings
# -diff: changes nothing, prints what tidying would change
(cd proxy && "$go" mod tidy -diff 2>&1) | sed -n 's|^+++ tidy/\([^ \t]*\).*|proxy/\1:1: go mod tidy would change it (./pgcipher fmt)|p' | findings
(cd proxy && GOFLAGS=-buildvcs=false "$go" vet ./... 2>&1) | grep -E '^[^#].*:[0-9]+:' | findings
(cd proxy && GOFLAGS=-buildvcs=false "$go" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... 2>&1) |
    grep -E '^[^ ]+\.go:[0-9]+:' | sed 's|^|proxy/|' | findings

# --- C: pgindent ---------------------------------------------------------
section "c: pgindent (our own files)"
mapfile -t c_files < <(our_files 'server/src/*.[ch]' 'columns/*.[ch]')
if [ ! -x "$tools/pg_bsd_indent/pg_bsd_indent" ]; then
    make -s -C "$tools/pg_bsd_indent" > /dev/null || { finding "pg_bsd_indent: build failed"; }
fi
typedefs=$(mktemp)
{
    cat "$tools/pgindent/typedefs.list"
    # 18's types that our files use under PG_VERSION_NUM >= 180000 (the
    # list is the default major's, 17's)
    printf '%s\n' PgAioHandle PgAioTargetData
    grep -ohP 'typedef\s+(struct|enum|union)\s+\w+\s+\K\w+(?=;)|^}\s*\K\w+(?=;)|typedef\s+[\w ]+\(\*\K\w+' "${c_files[@]}"
} | sort -u > "$typedefs"
scratch=$(mktemp -d)
# pgindent writes its scratch files into the working directory
pgindent() {
    (cd "$scratch" && PATH=$tools/pg_bsd_indent:$PATH perl "$tools/pgindent/pgindent" --typedefs="$typedefs" "$@")
}
c_files=("${c_files[@]/#/$top/}")
[ "$fix" = --fix ] && pgindent "${c_files[@]}"
# each hunk of the diff is a finding: FILE:LINE
pgindent --diff "${c_files[@]}" 2>&1 |
    awk '/^--- /{ file = $2 } /^@@ /{ split($2, a, ","); print file ":" substr(a[1], 2) ": pgindent: not formatted (./pgcipher fmt)" }' |
    sed "s|^$top/||" | findings
rm -rf "$typedefs" "$scratch"

# --- Shell ---------------------------------------------------------------
section "shell: shellcheck"
mapfile -t sh_files < <(our_files '*.sh' pgcipher .ci/run)
shellcheck -f gcc "${sh_files[@]}" | findings

# --- Python --------------------------------------------------------------
py_dirs=(bench scripts test/vendor test/packages proxy/test/orm proxy/test/drivers)
section "python: ruff check, ruff format (${py_dirs[*]})"
"$top/scripts/venv.sh" "$top/scripts/lint-requirements.txt" "$build/lint-venv" || exit 1
ruff=$build/lint-venv/bin/ruff
export RUFF_NO_CACHE=true	# nothing written into the checkout
if [ "$fix" = --fix ]; then
    "$ruff" check --quiet --fix "${py_dirs[@]}" > /dev/null
    "$ruff" format --quiet "${py_dirs[@]}"
fi
"$ruff" check --output-format=concise --quiet "${py_dirs[@]}" | findings
# the pinned ruff says "PATH:L:C: unformatted: ..."; older ones "Would reformat: PATH"
"$ruff" format --check --quiet --output-format concise "${py_dirs[@]}" 2>&1 |
    sed -n -e 's/^Would reformat: \(.*\)$/\1:1: ruff format: not formatted (.\/pgcipher fmt)/p' \
        -e 's/^\([^:]*:[0-9]*\):[0-9]*: unformatted: .*$/\1: ruff format: not formatted (.\/pgcipher fmt)/p' | findings

# --- Perl ----------------------------------------------------------------
section "perl: perltidy with PostgreSQL's perltidyrc"
mapfile -t pl_files < <(our_files '*.pl' '*.pm')
tidied=$(mktemp)
for f in "${pl_files[@]}"; do
    perltidy --profile="$tools/pgindent/perltidyrc" -st -se "$f" > "$tidied" 2>/dev/null ||
        { finding "$f:1: perltidy failed"; continue; }
    if ! cmp -s "$f" "$tidied"; then
        if [ "$fix" = --fix ]; then
            cat "$tidied" > "$f"
        else
            diff "$f" "$tidied" | sed -n "s|^\([0-9][0-9]*\)[,acd].*|$f:\1: perltidy: not formatted (./pgcipher fmt)|p" | findings
        fi
    fi
done
rm -f "$tidied"

# --- Commit messages ---------------------------------------------------
section "git: commit subjects of at most 72 characters (the detail in the body)"
# from the first commit made under the rule on; older ones stay as they are
first_ruled=eebf338
if git cat-file -e "$first_ruled^{commit}" 2>/dev/null; then
    git log --format='%h %s' "$first_ruled^..HEAD" | awk 'length($0) - 8 > 72 {
        print "commit " $1 ":1: subject of " length($0) - 8 " characters (at most 72)" }' | findings
fi

echo "lint: $problems finding(s)"
[ "$problems" = 0 ]
