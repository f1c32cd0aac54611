#!/usr/bin/env bash
# patches.sh — edit, regenerate and rebase server/patches/MAJOR/ with git.
#
# The patches are git format-patch files: a header (subject, why, what
# depends on it) and a diff against the pinned upstream source.  build.sh
# applies them with patch(1); this script turns them into a git repository
# with one commit per patch, so that editing a hook is an ordinary
# commit --amend or rebase -i, and turns the commits back into patches.
#
#   patches.sh unpack [DIR]        the pinned source as commit "upstream"
#                                  (tagged), one commit per patch on top
#   patches.sh export [DIR]        rewrite server/patches/MAJOR/*.patch from the
#                                  commits upstream..HEAD (stale files removed)
#   patches.sh check               unpack and export into a scratch directory
#                                  and compare: the files must come back
#                                  byte-identical (a test in ./pgcipher test)
#   patches.sh rebase TARBALL [DIR]
#                                  add TARBALL (another PostgreSQL source
#                                  tarball) as commit "upstream-new" and rebase
#                                  the patches onto it; on a conflict git stops:
#                                  resolve, "git rebase --continue", then export
#   patches.sh diffstat            upstream lines added and removed by the series
#   patches.sh pairs               each pair of 17/18 patches of one number
#                                  makes the same change (the lines added and
#                                  removed in each file, blank ones aside),
#                                  but the pairs server/patches/pairs-differ
#                                  names with why, which must differ
#
# MAJOR is $PGCIPHER_PG (default 18): each major has its own series.  DIR
# defaults to $PGCIPHER_BUILD/patches-git-MAJOR (./build/patches-git-17).
# The procedure for a new PostgreSQL release, and for carrying a fix to
# both series, is in server/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${PGCIPHER_BUILD:-$top/build}
major=${PGCIPHER_PG:-18}
patches=$here/patches/$major
# Fixed identity and abbreviation: the same commits give the same files.
git_id=(-c user.name=pgcipher -c user.email=pgcipher@localhost -c core.abbrev=12
        -c safe.directory="*"	# the build tree may belong to the user "pgcipher"
        -c core.autocrlf=false -c advice.detachedHead=false)

die() { echo "patches: $*" >&2; exit 1; }
# The developer's own git configuration (prefixes, diff algorithm, hooks,
# sign-off) must not change the bytes: only the settings above apply.
g() { GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "$dir" "${git_id[@]}" "$@"; }

# The pinned tarball, fetched and verified (the exact name: build/source may
# hold other versions)
pinned_tarball() {
    local out
    out=$("$here/fetch-source.sh" "$build" "$major") || exit 1
    tail -n 1 <<< "$out"
}

# Replace the work tree's content by a tarball's and commit it as $2.
commit_tarball() {
    local tarball=$1 message=$2
    g rm -q -r --cached . >/dev/null 2>&1 || true
    find "$dir" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
    tar -xf "$tarball" -C "$dir" --strip-components=1
    # everything the tarball holds is upstream, ignored or not
    g add -A -f .
    GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" \
        g commit -q --allow-empty -m "$message"
}

unpack() {
    local tarball
    tarball=$(pinned_tarball) || die "could not fetch the pinned source"
    # never delete a directory that is not a patch repository of ours
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ] && ! g rev-parse -q --verify upstream >/dev/null 2>&1; then
        die "$dir exists and is not a patch repository: choose another directory"
    fi
    echo "patches: unpacking $(basename "$tarball") into $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    g init -q -b main
    # commits a developer adds get the same identity as the others
    g config user.name pgcipher
    g config user.email pgcipher@localhost
    commit_tarball "$tarball" "upstream: $(basename "$tarball")"
    g tag upstream
    local p n=0
    for p in "$patches"/*.patch; do
        [ -e "$p" ] || continue
        g am -q --keep-cr --whitespace=nowarn "$p" \
            || die "$(basename "$p") does not apply (git am --show-current-patch=diff in $dir)"
        n=$((n + 1))
    done
    echo "patches: $n commits on top of tag upstream; edit, commit, then: $0 export $dir"
}

export_patches() {
    [ -d "$dir/.git" ] || die "$dir is not a patch repository (run: $0 unpack $dir)"
    local out=$1 base
    base=$(g rev-parse -q --verify upstream-new 2>/dev/null || g rev-parse upstream)
    # a rebase in progress would export half a series
    if [ -d "$dir/.git/rebase-merge" ] || [ -d "$dir/.git/rebase-apply" ]; then
        die "a rebase or git am is in progress in $dir: finish it first"
    fi
    [ -z "$(g status --porcelain --untracked-files=no)" ] \
        || die "$dir has uncommitted changes: commit them first"
    local tmp
    tmp=$(mktemp -d)
    g format-patch -q --zero-commit --no-signature --no-numbered \
        --filename-max-length=64 -o "$tmp" "$base..HEAD"
    if [ -z "$(ls "$tmp")" ]; then
        rm -rf "$tmp"
        die "no commits on top of upstream in $dir: nothing written"
    fi
    mkdir -p "$out"
    rm -f "$out"/*.patch
    cp "$tmp"/*.patch "$out"/
    rm -rf "$tmp"
    echo "patches: wrote $(find "$out" -maxdepth 1 -name '*.patch' | wc -l) patches to $out"
}

# The series in a scratch repository, removed at exit ($scratch is global:
# the EXIT trap runs after the caller returns)
unpack_scratch() {
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    dir=$scratch/git
    unpack > /dev/null
}

check() {
    unpack_scratch
    export_patches "$scratch/out" > /dev/null
    if ! diff -r "$patches" "$scratch/out"; then
        die "the patches do not come back byte-identical from git (diff above)"
    fi
    # every hook in an upstream C file carries a "pgcipher" marker a rebaser
    # can search for: each hunk (one line of context) with added lines other than includes names it
    local unmarked
    unmarked=$(g diff -U1 upstream HEAD -- '*.c' '*.h' | awk '
        function flush() {
            if (added && !marked) printf "%s %s\n", file, where
            added = 0; marked = 0
        }
        /^\+\+\+ / { flush(); file = substr($2, 3); next }
        /^@@/ { flush(); where = $3; next }
        /^\+#include / { next }
        /^\+/ { added = 1; if ($0 ~ /pgcipher/) marked = 1 }
        END { flush() }')
    [ -z "$unmarked" ] || die "hooks without a pgcipher marker (file, +line):
$unmarked"
    echo "patches: $(find "$patches" -maxdepth 1 -name '*.patch' | wc -l) patches come back byte-identical from git"
}

# change PATCH: what a patch adds and removes, file by file, without
# context, positions or blank lines
change() {
    awk '/^diff --git /{ print; next } /^(\+\+\+|---) /{ next } /^[-+][ \t]*$/{ next } /^[-+]/{ print }' "$1"
}

pairs() {
    local allow=$here/patches/pairs-differ p n why bad=0 same=0 differ=0
    declare -A allowed=()
    while read -r n why; do
        [[ -z $n || $n == \#* ]] && continue
        allowed[$n]=$why
    done < "$allow"
    for p in "$here"/patches/17/*.patch "$here"/patches/18/*.patch; do
        n=$(basename "$p"); n=${n%%-*}
        local other=$here/patches/18
        [[ $p == */patches/18/* ]] && other=$here/patches/17
        if ! compgen -G "$other/$n-*.patch" > /dev/null; then
            echo "patches: $p has no patch $n in $other"; bad=1
        fi
    done
    for p in "$here"/patches/17/*.patch; do
        n=$(basename "$p"); n=${n%%-*}
        local q
        q=$(compgen -G "$here/patches/18/$n-*.patch" | head -1) || continue
        if diff -q <(change "$p") <(change "$q") > /dev/null; then
            same=$((same + 1))
            [ -z "${allowed[$n]:-}" ] || { echo "patches: $n is the same change on 17 and 18: take it out of $allow"; bad=1; }
        else
            differ=$((differ + 1))
            if [ -z "${allowed[$n]:-}" ]; then
                echo "patches: $n makes another change on 18 than on 17 (not in $allow):"
                diff <(change "$p") <(change "$q") | head -20; bad=1
            else
                echo "patches: $n differs on purpose: ${allowed[$n]}"
            fi
        fi
    done
    [ $bad = 0 ] || die "the 17 and 18 series are not in step"
    echo "patches: $same pairs make the same change on 17 and 18, $differ differ on purpose"
}

diffstat() {
    unpack_scratch
    g diff --shortstat upstream HEAD
}

rebase() {
    local tarball=${1:?usage: patches.sh rebase TARBALL [DIR]}
    [ -f "$tarball" ] || die "$tarball: no such file"
    tarball=$(realpath "$tarball")
    [ -d "$dir/.git" ] || unpack
    g rev-parse -q --verify upstream-new >/dev/null && die "$dir already has upstream-new: unpack afresh"
    g checkout -q --detach upstream
    commit_tarball "$tarball" "upstream: $(basename "$tarball")"
    g tag upstream-new
    g checkout -q main
    echo "patches: rebasing $(g rev-list --count upstream..main) patches onto $(basename "$tarball")"
    if ! g rebase -q --onto upstream-new upstream main; then
        echo "patches: conflict — resolve in $dir, git add, git rebase --continue; then: $0 export $dir" >&2
        exit 1
    fi
    echo "patches: every patch applied; $0 export $dir writes them (then pin the new tarball in fetch-source.sh)"
}

cmd=${1:-}
shift || true
case "$cmd" in
    unpack)   dir=${1:-$build/patches-git-$major}; unpack ;;
    export)   dir=${1:-$build/patches-git-$major}; export_patches "$patches" ;;
    check)    check ;;
    diffstat) diffstat ;;
    pairs)    pairs ;;
    rebase)   dir=${2:-$build/patches-git-$major}; rebase "${1:-}" ;;
    *)        sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 1 ;;
esac
