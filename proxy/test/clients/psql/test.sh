#!/usr/bin/env bash
# psql client test (run by ../run.sh): ops.sql on enc_t and on plain_t
# through the proxy, outputs diffed after replacing the table name and the
# marker prefix; refuse.sql checks the proxy's refusals (PC001).
set -euo pipefail
: "${PGC_BIN:?}" "${PGC_DB:?}" "${PGC_SCRATCH:?}" "${PGC_HERE:?}"
here=$PGC_HERE/psql
dir=$PGC_SCRATCH
psql=("$PGC_BIN/psql" -X -d "$PGC_DB" -h "$PGC_HOST" -p "$PGC_PORT")

# 60 rows in COPY text format; NULLs every few rows, markers in t, tm, tr
rows() {  # $1: marker prefix
    awk -v mk="$1" 'function n(every, v) { return (i % every == 0) ? "\\N" : v }
    BEGIN { for (i = 1; i <= 60; i++) {
        printf "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i,
            n(10, i % 7), n(17, i * 3 - 50), n(11, sprintf("%.0f", (i % 5) * 3000000000 - 6000000000)),
            n(13, sprintf("%.0f", 1000000000 - i * 123456789)), n(12, sprintf("%.17g", i * 1.1 - 7)),
            n(9, sprintf("%d.%02d", i % 9 - 4, (i * 7) % 100)),
            n(9, mk "-psql-t" (i % 6)), n(14, mk "-psql-m" i " word" (i % 4) " lorem"),
            n(4, mk "-psql-r" i), n(8, sprintf("\\\\x%02x%02x", i % 16, 255 - i % 5)),
            n(15, sprintf("2024-%02d-%02d", 1 + i % 12, 1 + (i * 7) % 28)),
            n(16, sprintf("2024-%02d-%02d %02d:%02d:%02d.%d+%02d", 1 + (i * 5) % 12, 1 + i % 28, i % 24, i % 60, (i * 7) % 60, i * 1000 % 999999, i % 3)),
            n(7, (i % 3 == 0) ? "t" : "f") } }'
}

sides=(enc plain)
for side in "${sides[@]}"; do
    case $side in
        enc) tab=enc_t mk=PGCMARK-E ;;
        plain) tab=plain_t mk=PGCMARK-P ;;
    esac
    rows "$mk" > "$dir/rows-$side.tsv"
    sed -e "/^--/d" -e "s/@TAB@/$tab/g" -e "s/@MK@/$mk/g" -e "s/@SIDE@/$side/g" -e "s|@DIR@|$dir|g" \
        "$here/ops.sql" > "$dir/ops-$side.sql"
    # errors do not stop the script: they show up in the diff, all of them
    "${psql[@]}" -a -f "$dir/ops-$side.sql" > "$dir/out-$side.log" 2>&1 ||
        { echo "psql failed on $tab:"; tail -n 20 "$dir/out-$side.log"; exit 1; }
done
if grep -n 'ERROR:  ' "$dir/out-plain.log"; then
    echo "psql: ops.sql fails on plain_t (a bug of the test)"; exit 1
fi

# the same output but for the table name and the marker prefix
norm() { sed -e 's/\benc_t\b/TAB/g; s/\bplain_t\b/TAB/g; s/PGCMARK-[EP]/MK/g' -e "s|$dir/||g; s/-enc\././g; s/-plain\././g" "$1"; }
norm "$dir/out-enc.log" > "$dir/out-enc.norm"
norm "$dir/out-plain.log" > "$dir/out-plain.norm"
fail=0
stmts=$(grep -c ';$' "$here/ops.sql" || true)
if ! diff -u "$dir/out-plain.norm" "$dir/out-enc.norm" > "$dir/ops.diff"; then
    echo "psql: enc_t and plain_t differ (- plain_t, + enc_t):"; head -n 150 "$dir/ops.diff"; fail=1
else printf '%s\n' "check: ops.sql ($stmts statements: \\copy in/out text+csv, INSERT/UPDATE/DELETE, =, <>, IN, BETWEEN, <, >, LIKE, ORDER BY, GROUP BY, DISTINCT, count, MIN/MAX, IS NULL, self-join, ROLLBACK, SAVEPOINT, \\gset, \\bind): $(wc -l < "$dir/out-enc.log") output lines identical on enc_t and plain_t"
fi
copy_bad=0
for ext in txt csv; do
    [ -f "$dir/out-enc.$ext" ] || { echo "psql: \\copy TO out.$ext wrote nothing on enc_t"; copy_bad=1 fail=1; continue; }
    norm "$dir/out-enc.$ext" | sort > "$dir/out-enc.$ext.norm"
    norm "$dir/out-plain.$ext" | sort > "$dir/out-plain.$ext.norm"
    cmp -s "$dir/out-enc.$ext.norm" "$dir/out-plain.$ext.norm" ||
        { echo "psql: \\copy TO out.$ext differs"; diff "$dir/out-plain.$ext.norm" "$dir/out-enc.$ext.norm" | head -20; copy_bad=1 fail=1; }
done
[ $copy_bad = 1 ] || echo "check: \\copy TO files (text, csv with header) identical"

[ "$PGC_DIRECT" = 1 ] && { echo "check: refusals skipped (direct mode)"; exit $fail; }

"${psql[@]}" -f "$here/refuse.sql" > "$dir/refuse.log" 2>&1 || { cat "$dir/refuse.log"; exit 1; }
bad=0
while read -r _ name got; do
    want=PC001
    case $name in usable) want=00000 ;; aborted_tx) want=25P02 ;; rolled_back) want=0 ;; esac
    [ "$got" = "$want" ] || { echo "psql: refusal $name: got ${got:-nothing}, want $want"; bad=1; }
done < <(grep '^result ' "$dir/refuse.log")
n=$(grep -c '^result ' "$dir/refuse.log")
[ "$n" = 13 ] || { echo "psql: refuse.sql gave $n results, want 13"; bad=1; }
if [ $bad = 1 ]; then cat "$dir/refuse.log"; fail=1; else echo "check: refuse.sql: 9 statements refused with PC001, session usable, refusal in a transaction aborts it (25P02), ROLLBACK undoes"; fi

# ON_ERROR_STOP: psql stops with status 3 on the refused statement, the
# error names the SQLSTATE
set +e
"${psql[@]}" -v ON_ERROR_STOP=1 -v VERBOSITY=verbose > "$dir/stop.log" 2>&1 <<'SQL'
SELECT count(*) FROM enc_t;
SELECT id FROM enc_t WHERE tr = 'PGCMARK-E-psql-stop';
SELECT 'not reached';
SQL
rc=$?
set -e
if [ $rc != 3 ] || ! grep -q 'ERROR:  PC001' "$dir/stop.log" || grep -q 'not reached' "$dir/stop.log"; then
    echo "psql: ON_ERROR_STOP: exit $rc, want 3 and ERROR PC001:"; cat "$dir/stop.log"; fail=1
else
    echo "check: ON_ERROR_STOP stops with status 3 at the refused statement (ERROR:  PC001)"
fi
exit $fail
