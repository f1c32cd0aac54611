#!/usr/bin/env bash
# run-on-device.sh — what runs ON the lent device machine for issue 30,
# section 4 (many cores), as root in the repository's copy there:
#
#   1. the hardware as the device reports it (nproc, lscpu, CPU flags,
#      kernel, memory, file systems, the affinity this shell may use)
#      into $OUT/hardware.txt;
#   2. unpack the carry (bench/device/carry.sh: build/device/carry/pgcb.tar.xz)
#      into /opt/pgcb and check that every binary starts;
#   3. an unprivileged user for PostgreSQL, which refuses root (useradd, or
#      lines appended to /etc/passwd and /etc/group where useradd fails);
#   4. bench/device/many_cores.py as that user (setpriv, else runuser, else
#      su), by default as the first run: alibaba-sysbench at 8-64 threads,
#      plaintext-direct vs encrypted-through-pgcipher-proxy, then pgbench
#      select-only and TPC-B-like at 16-64 clients for stock, aes-256 and
#      stock-2; options pick other parts (TPROC-C: --parts tprocc), runs and
#      sizes (many_cores.py --help; the second run's line is in
#      bench/reports/2026-11-26-many-cores/report.md); the server on the
#      first half of the CPUs, the clients and the proxy on the other half;
#      results.json, results.csv and summary.md into $OUT, the whole log
#      into $OUT/log.txt.
#
# The peer (open_pg_tde, issue 30 section 1) is not built in this repository
# yet, so it is not here.
#
# Usage: bench/device/run-on-device.sh [--tiny] [many_cores.py options]
#   --tiny: the local smoke test (2 threads/clients, tiny tables, one TPROC-C
#   warehouse, short runs); options after it override its sizes.
# Environment: OUT (default build/device/out), CARRY (the tarball),
# DEVICE_USER (default pgcb), WORKDIR (default /var/tmp/pgcb-work).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$top/build/device/out}
carry=${CARRY:-$top/build/device/carry/pgcb.tar.xz}
user=${DEVICE_USER:-pgcb}
work=${WORKDIR:-/var/tmp/pgcb-work}
prefix=/opt/pgcb
t0=$(date +%s)
mkdir -p "$out"
chmod 777 "$out"
# the unprivileged user writes there too: its parents (/root) must let it pass
d=$out; while d=$(dirname "$d"); [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null; done
exec > >(tee -a "$out/log.txt") 2>&1
say() { echo "[device $(( $(date +%s) - t0 ))s] $*"; }

tiny=()
if [ "${1:-}" = --tiny ]; then
    shift
    tiny=(--threads 2 --clients 2 --rows 500 --scale 1 --sb-seconds 2 --pgb-seconds 2 --rounds 2
          --tpcc-clients 2 --warehouses 1 --tpcc-seconds 2 --tpcc-shared-buffers-mb 32
          --shared-buffers-mb 32 --pgb-shared-buffers-mb 16 --total-budget 1200)
fi

# 1. hardware
{
    echo "date: $(date -u +%FT%TZ)"
    echo "nproc: $(nproc)"
    echo "uname: $(uname -a)"
    grep -m1 '^model name' /proc/cpuinfo
    echo "cpu flags of note: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'aes|vaes|avx2|avx512f|vpclmulqdq|sha_ni' | tr '\n' ' ')"
    echo "this shell: $(grep -E '^Cpus_allowed(_list)?:' /proc/self/status | tr '\n' ' ')"
    echo "cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo n/a)"
    echo "--- lscpu"; lscpu 2>&1
    echo "--- free -g"; free -g 2>&1
    echo "--- df -hT"; df -hT / /tmp /var/tmp /dev/shm 2>&1
    echo "--- os-release"; cat /etc/os-release 2>&1
    echo "--- dmesg (head)"; dmesg 2>/dev/null | head -5
} > "$out/hardware.txt" 2>&1
say "hardware: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r)"

# 2. the carry
[ -f "$carry" ] || { say "no carry at $carry (bench/device/carry.sh makes it)"; exit 1; }
rm -rf "$prefix"
if command -v xz >/dev/null; then unxz=(xz -dc "$carry")
else unxz=(python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$carry")
fi
"${unxz[@]}" | tar -xf - -C / || { say "could not unpack $carry"; exit 1; }
say "unpacked $(du -sh "$prefix" | cut -f1) into $prefix"
# the harness's Python from this working tree, over the carry's (which
# may be older than the tree the device received)
(cd "$top" && tar -cf - bench/__init__.py bench/*.py bench/peer/*.py bench/scenarios/*.py bench/device/*.py) \
    | tar -xf - -C "$prefix/harness" && chmod -R a+rX "$prefix/harness"
sed -n '1,3p' "$prefix/MANIFEST"
ok=1
for b in "$prefix"/pgcipher/bin/postgres "$prefix"/stock/bin/postgres "$prefix"/pgcipher/bin/psql "$prefix"/stock/bin/pgbench; do
    if ! v=$("$b" --version 2>&1); then ok=0; fi
    echo "  $b: $v"
done
sysbench --version >/dev/null 2>&1 || true
for b in "$prefix"/bin/sysbench "$prefix"/bin/pgbouncer; do
    if ! v=$("$b" --version 2>&1 | head -1); then ok=0; fi
    echo "  $b: $v"
done
"$prefix"/bin/pgcipher-keys new-cmk >/dev/null 2>&1 || { echo "  pgcipher-keys new-cmk failed"; ok=0; }
"$prefix"/bin/pgcipher-proxy --help > /dev/null 2>&1; echo "  pgcipher-proxy --help: rc $?"
for b in "$prefix"/pgcipher/bin/postgres "$prefix"/stock/bin/postgres "$prefix"/libexec/sysbench "$prefix"/bin/pgcipher-proxy; do
    LD_LIBRARY_PATH=$prefix/syslib ldd "$b" 2>&1 | grep -q 'not found' && { echo "  $b: missing libraries:"; LD_LIBRARY_PATH=$prefix/syslib ldd "$b" | grep 'not found'; ok=0; }
done
[ $ok = 1 ] || { say "a carried binary does not run here"; exit 1; }

# 3. an unprivileged user
if ! id "$user" >/dev/null 2>&1; then
    useradd --no-create-home --home-dir "$work" --shell /bin/bash "$user" 2>/dev/null \
        || { echo "$user:x:4711:4711:pgcipher bench:$work:/bin/bash" >> /etc/passwd
             echo "$user:x:4711:" >> /etc/group; }
fi
id "$user" || { say "could not create the user $user"; exit 1; }
rm -rf "$work"
mkdir -p "$work"
chown "$user:" "$work" 2>/dev/null || chown "$user" "$work"
uid=$(id -u "$user") gid=$(id -g "$user")
if command -v setpriv >/dev/null && setpriv --reuid="$uid" --regid="$gid" --clear-groups true 2>/dev/null; then
    as_user=(setpriv --reuid="$uid" --regid="$gid" --clear-groups)
elif runuser -u "$user" -- true 2>/dev/null; then
    as_user=(runuser -u "$user" --)
else
    # shellcheck disable=SC2016  # expanded by the shell su starts, on purpose
    as_user=(su "$user" -s /bin/sh -c '"$0" "$@"')
fi
py=""
for c in /usr/bin/python3 /opt/torch/.venv/bin/python3 python3; do
    if "${as_user[@]}" env HOME="$work" "$c" -c 'import sys; assert sys.version_info >= (3, 9)' 2>/dev/null; then py=$c; break; fi
done
if [ -z "$py" ]; then
    # a Python outside /usr the user cannot reach: open its directories to
    # traversal and its standard library to reading (a throwaway machine)
    for c in /opt/torch/.venv/bin/python3 "$(command -v python3)"; do
        [ -x "$c" ] || continue
        r=$(readlink -f "$c") d=$r
        while d=$(dirname "$d"); [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null; done
        case $r in /usr/*) ;; *) chmod -R o+rX "$(dirname "$(dirname "$r")")/lib" 2>/dev/null ;; esac
        if "${as_user[@]}" env HOME="$work" "$c" -c 'import sys; assert sys.version_info >= (3, 9)' 2>/dev/null; then py=$c; break; fi
    done
fi
[ -n "$py" ] || { say "no python3 the user $user can run"; exit 1; }
say "running as $user (uid $uid) via ${as_user[0]}, $py ($("$py" --version 2>&1))"

# 4. the benchmarks
say "many_cores.py ${tiny[*]} $*"
"${as_user[@]}" env HOME="$work" PATH="$prefix/bin:/usr/bin:/bin" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    "$py" "$prefix/harness/bench/device/many_cores.py" \
    --out "$out" --workdir "$work/w" \
    --pgcipher "$prefix/pgcipher" --stock "$prefix/stock" \
    --proxy "$prefix/bin/pgcipher-proxy" --keys "$prefix/bin/pgcipher-keys" \
    "${tiny[@]}" "$@"
rc=$?
say "many_cores.py exited with $rc"
[ -f "$out/summary.md" ] && cat "$out/summary.md"
exit $rc
