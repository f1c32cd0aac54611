#!/usr/bin/env bash
# run.sh — the packages suite: pgcipher's Debian packages
# (scripts/package.sh) installed with apt into a clean Debian 12 root and
# used there as a DBA uses PostgreSQL on Debian (in-root.sh says what).
#
# The root is made by mmdebstrap from Debian's registry, as the unprivileged
# user running the tests (--mode=unshare: a user namespace, the subordinate
# ids of /etc/subuid), with postgresql-common and systemd (for
# systemd-analyze) from Debian; the local repository of the packages is
# copied in, and in-root.sh runs in it as its root.  Nothing outside the
# build directory is touched; the root is thrown away.
#
# Between in-root.sh's checks and its purge, every shell block of the
# operations guide, docs/operations.md, runs there in order (guide.py turns
# it into a script), against a real OpenBao and a real PyKMIP server that
# kms-servers.sh starts on this host under the guide's names.  The guide is
# written for 18: with PGCIPHER_PG=17 it is skipped, saying so.
#
# Usage: test/packages/run.sh   (PGCIPHER_TOP, PGCIPHER_BUILD, PGCIPHER_PG as
#                                for scripts/test.sh)
set -euo pipefail
top=${PGCIPHER_TOP:?}
build=${PGCIPHER_BUILD:?}
major=${PGCIPHER_PG:-18}
out=$build/packages

"$top/scripts/package.sh"
ls "$out"/pgcipher-postgresql-"$major"_*.deb > /dev/null || { echo "packages: no server package in $out" >&2; exit 1; }

# mmdebstrap's unshared user reads the repository through these
chmod -R a+rX "$out"
log=$build/packages-root.log
work=$build/packages-test
rm -rf "$work"; mkdir -p "$work"
echo 0 > "$work/tap.n"
hooks=()
if [ "$major" = 18 ]; then
    (cd "$top" && python3 test/packages/guide.py docs/operations.md) > "$work/guide.sh"
    trap '"$top/test/packages/kms-servers.sh" stop "$work/kms"' EXIT
    "$top/test/packages/kms-servers.sh" start "$work/kms"
    # the guide, then the stop of whatever it left running (in-root.sh's trap)
    hooks=(--customize-hook="sync-in $work/kms/root /"
        --customize-hook="copy-in $work/guide.sh /root"
        --customize-hook="chroot \"\$1\" env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive BAO_TOKEN=$(cat "$work/kms/bao-token") TAP_COUNT=/root/tap.n sh -c 'bash /root/guide.sh; rc=\$?; MAJOR=$major PHASE=stop sh /root/in-root.sh; exit \$rc'")
else
    echo "packages: docs/operations.md is written for 18: its blocks are not run on $major"
fi
echo "packages: a clean Debian 12 root (mmdebstrap, unshare mode), the packages installed in it (log: $log)"
mirror=$("$top/scripts/debian-mirror.sh") || mirror=http://deb.debian.org/debian
set +e
# shellcheck disable=SC2016 # $1 is the hook's: the root's path
mmdebstrap --mode=unshare --variant=apt --skip=cleanup/tmp \
    --include=postgresql-common,ca-certificates,systemd,locales-all,adduser,curl,sudo \
    --setup-hook='mkdir -p "$1/srv/pgcipher"' \
    --customize-hook="sync-in $out /srv/pgcipher" \
    --customize-hook="copy-in $top/test/packages/in-root.sh $work/tap.n /root" \
    --customize-hook='chroot "$1" sh -c "echo 127.0.0.1 openbao.example.net kmip.example.net \$(hostname) >> /etc/hosts"' \
    --customize-hook="chroot \"\$1\" env MAJOR=$major PHASE=checks TAP_COUNT=/root/tap.n sh /root/in-root.sh" \
    "${hooks[@]}" \
    --customize-hook="chroot \"\$1\" env MAJOR=$major PHASE=purge TAP_COUNT=/root/tap.n sh /root/in-root.sh" \
    bookworm /dev/null "$mirror" > "$log" 2>&1
rc=$?
set -e
grep -E '^(ok|not ok|1\.\.|#) ' "$log" || true
if [ $rc != 0 ] || grep -q '^not ok' "$log" || ! grep -q '^1\.\.' "$log"; then
    tail -40 "$log" >&2
    echo "packages: FAILED (mmdebstrap exit $rc; log: $log)" >&2
    exit 1
fi
# what the root's server said of its build, against Debian's own packages
# of the same upload (test/packages/like_debian.py)
like=$work/like-debian.log
if ! python3 "$top/test/packages/like_debian.py" "$build" "$major" "$log" > "$like" 2>&1; then
    cat "$like"
    echo "packages: FAILED: not configured or furnished like Debian's PostgreSQL $major" >&2
    exit 1
fi
cat "$like"
echo "packages: $(($(grep -c '^ok' "$log") + $(grep -c '^ok' "$like"))) passed, 0 failed"
