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
echo "packages: a clean Debian 12 root (mmdebstrap, unshare mode), the packages installed in it (log: $log)"
mirror=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -E '/debian/?$' | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
set +e
# shellcheck disable=SC2016 # $1 is the hook's: the root's path
mmdebstrap --mode=unshare --variant=apt --skip=cleanup/tmp \
    --include=postgresql-common,ca-certificates,systemd,locales-all,adduser \
    --setup-hook='mkdir -p "$1/srv/pgcipher"' \
    --customize-hook="sync-in $out /srv/pgcipher" \
    --customize-hook="copy-in $top/test/packages/in-root.sh /root" \
    --customize-hook="chroot \"\$1\" env MAJOR=$major sh /root/in-root.sh" \
    bookworm /dev/null "$mirror" > "$log" 2>&1
rc=$?
set -e
grep -E '^(ok|not ok|1\.\.|#) ' "$log" || true
if [ $rc != 0 ] || grep -q '^not ok' "$log" || ! grep -q '^1\.\.' "$log"; then
    tail -40 "$log" >&2
    echo "packages: FAILED (mmdebstrap exit $rc; log: $log)" >&2
    exit 1
fi
echo "packages: $(grep -c '^ok' "$log") passed, 0 failed"
