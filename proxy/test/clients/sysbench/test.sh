#!/usr/bin/env bash
# sysbench client test (run by ../run.sh): sysbench 1.0.20's stock
# oltp_point_select and oltp_read_only (SUM(k) computed by the proxy) and,
# after the comparison, oltp_read_write (k = k + 1 as a read-modify-write)
# against sbtest1, whose k, c and pad are encrypted,
# with server-side prepared statements (--db-ps-mode=auto) and without
# (disable).  sysbench's prepare would create plain tables, so schema.sql
# here creates sbtest1 and the rows are loaded as sysbench would (k random,
# c and pad groups of random digits), through the proxy with psql \copy.
# Rate-limited (300 transactions/s) to keep the CPU modest.  Fails on any
# sysbench error; afterwards sbtest1 and its plaintext twin
# sbplain1 must read the same through the proxy, sysbench's range queries
# included.
set -euo pipefail
: "${PGC_BIN:?}" "${PGC_DB:?}" "${PGC_SCRATCH:?}" "${PGC_HERE:?}"
here=$PGC_HERE/sysbench
dir=$PGC_SCRATCH
rows=2000
psql=("$PGC_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$PGC_DB")
command -v sysbench > /dev/null || { echo "sysbench is not installed (scripts/deps.sh)"; exit 1; }
[[ $(sysbench --help) == *'pgsql - PostgreSQL driver'* ]] || { echo "this sysbench has no pgsql driver"; exit 1; }

"${psql[@]}" -v direct="$PGC_DIRECT" -f "$here/schema.sql" > /dev/null
# the markers go into pad: PGCMARK-E-sysbench-<id> (sbtest1) and
# PGCMARK-P-sysbench-<id> (sbplain1), then digit groups like sysbench's
for side in E P; do
    awk -v n=$rows -v mk="PGCMARK-$side-sysbench" 'function digits(groups,   s, g, j) {
            s = ""; for (g = 0; g < groups; g++) { if (g) s = s "-"
                for (j = 0; j < 11; j++) s = s int(rand() * 10) }; return s }
        BEGIN { srand(20240101); for (i = 1; i <= n; i++) {
            k = int(rand() * n) + 1; c = digits(10); pad = mk "-" i "-" digits(4)
            printf "%d\t%d\t%s\t%s\n", i, k, c, pad } }' > "$dir/rows-$side.tsv"
done
"${psql[@]}" -c "\\copy sbtest1 (id, k, c, pad) FROM '$dir/rows-E.tsv'" \
    -c "\\copy sbplain1 (id, k, c, pad) FROM '$dir/rows-P.tsv'" -c "ANALYZE sbplain1"
echo "check: loaded $rows rows into sbtest1 (k EQ, c ORD, pad RND) and sbplain1 with \\copy"

fail=0
common=(--db-driver=pgsql --pgsql-host="$PGC_HOST" --pgsql-port="$PGC_PORT" --pgsql-user="$PGC_USER"
        --pgsql-db="$PGC_DB" --tables=1 --table-size="$rows" --threads=2 --time=3 --rate=300 --rand-seed=7)
for test in oltp_point_select oltp_read_only; do
    for ps in auto disable; do
        log=$dir/$test-$ps.log
        if ! sysbench "$test" "${common[@]}" --db-ps-mode=$ps run > "$log" 2>&1; then
            echo "sysbench $test --db-ps-mode=$ps failed:"; tail -n 20 "$log"; fail=1; continue
        fi
        queries=$(sed -n 's/^ *read: *\([0-9]*\)$/\1/p' "$log")
        ignored=$(sed -n 's/^ *ignored errors: *\([0-9]*\) .*/\1/p' "$log")
        if [ "${ignored:-x}" != 0 ] || [ "${queries:-0}" -lt 100 ] || grep -q 'FATAL' "$log"; then
            echo "sysbench $test --db-ps-mode=$ps: ${queries:-?} reads, ${ignored:-?} ignored errors:"; cat "$log"; fail=1
            continue
        fi
        echo "check: sysbench $test --db-ps-mode=$ps, 2 threads, 3 s at 300 tx/s: $queries reads, 0 errors ($(sed -n 's/^ *transactions: *\([0-9]*\) .*/\1/p' "$log") transactions)"
    done
done

# the same answers from the encrypted table and its twin, sysbench's own
# statements included
for tab in sbtest1 sbplain1; do
    "${psql[@]}" -A -t > "$dir/read-$tab.txt" <<SQL
SELECT id, k, c, pad FROM $tab ORDER BY id;
SELECT c FROM $tab WHERE id=17;
SELECT c FROM $tab WHERE id BETWEEN 100 AND 199 ORDER BY c;
SELECT DISTINCT c FROM $tab WHERE id BETWEEN 1000 AND 1099 ORDER BY c;
SELECT id FROM $tab WHERE k = 77 ORDER BY id;
SELECT k, count(*), min(id) FROM $tab GROUP BY k HAVING count(*) > 3 ORDER BY min(id);
SELECT c FROM $tab WHERE id < 300 ORDER BY c DESC;
SQL
    sed -i 's/PGCMARK-[EP]/MK/' "$dir/read-$tab.txt"
done
if ! cmp -s "$dir/read-sbtest1.txt" "$dir/read-sbplain1.txt"; then
    echo "sysbench: sbtest1 and sbplain1 read differently (< sbplain1, > sbtest1):"
    diff "$dir/read-sbplain1.txt" "$dir/read-sbtest1.txt" | head -20; fail=1
else
    echo "check: sbtest1 and sbplain1 read the same after the runs ($(wc -l < "$dir/read-sbtest1.txt") lines: all rows, point, range ORDER BY c, DISTINCT c, k =, GROUP BY k)"
fi

# writes: k = k + 1 (read-modify-write in the proxy), c = ?, DELETE and
# INSERT; sysbench retries deadlocks (ignored errors), any other error fails
for ps in auto disable; do
    log=$dir/oltp_read_write-$ps.log
    if ! sysbench oltp_read_write "${common[@]}" --db-ps-mode=$ps run > "$log" 2>&1 || grep -q FATAL "$log"; then
        echo "sysbench oltp_read_write --db-ps-mode=$ps failed:"; tail -n 20 "$log"; fail=1; continue
    fi
    echo "check: sysbench oltp_read_write --db-ps-mode=$ps: $(sed -n 's/^ *transactions: *\([0-9]*\) .*/\1/p' "$log") transactions, $(sed -n 's/^ *write: *\([0-9]*\)$/\1/p' "$log") writes, $(sed -n 's/^ *ignored errors: *\([0-9]*\) .*/\1/p' "$log") deadlocks retried"
done
# the table still reads whole through the proxy: every row decrypts
n=$("${psql[@]}" -A -t -c "SELECT count(k), count(*), sum(k) IS NOT NULL FROM sbtest1")
[ "$n" = "$rows|$rows|t" ] || { echo "sysbench: after oltp_read_write, count(k)|count(*)|sum: $n, want $rows|$rows|t"; fail=1; }
exit $fail
