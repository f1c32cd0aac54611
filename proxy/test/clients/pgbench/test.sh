#!/usr/bin/env bash
# pgbench client test (run by ../run.sh): read.sql and write.sql with
# 2 clients in the simple, extended and prepared protocols, on enc_t and
# plain_t with the same --random-seed; pgbench must report no failed
# transaction, and the tables must end up equal.
set -euo pipefail
: "${PGC_BIN:?}" "${PGC_DB:?}" "${PGC_SCRATCH:?}" "${PGC_HERE:?}"
here=$PGC_HERE/pgbench
dir=$PGC_SCRATCH
psql=("$PGC_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$PGC_DB")

# 200 rows, loaded through the proxy with \copy; i4 = id, so that the
# point reads find one row each
for side in enc plain; do
    case $side in enc) tab=enc_t mk=PGCMARK-E ;; plain) tab=plain_t mk=PGCMARK-P ;; esac
    awk -v mk="$mk" 'BEGIN { for (i = 1; i <= 200; i++)
        printf "%d\t%d\t%d\t%d\t%d\t%s\t%d.5\t%s-pgbench-%d\t%s-pgbench-m%d text\t%s-pgbench-r%d\t\\\\x%04x\t2024-%02d-%02d\t2024-01-01 %02d:%02d:00+00\t%s\n",
            i, i, i * 3 - 300, i * 1000000007, i * -1000, i / 8, i % 13, mk, i % 10, mk, i, mk, i, i,
            1 + i % 12, 1 + i % 28, i % 24, i % 60, (i % 2 ? "t" : "f") }' > "$dir/rows-$side.tsv"
    "${psql[@]}" -c "\\copy $tab FROM '$dir/rows-$side.tsv'"
    for s in read write; do
        sed -e '/^--/d' -e "s/@TAB@/$tab/g" "$here/$s.sql" > "$dir/$s-$side.sql"
    done
done

fail=0
for mode in simple extended prepared; do
    # -M simple pastes the variables' text into the query, the others bind
    # them as parameters (of unknown type)
    q=; [ $mode = simple ] && q="'"
    for side in enc plain; do
        case $side in enc) tab=enc_t mk=PGCMARK-E ;; plain) tab=plain_t mk=PGCMARK-P ;; esac
        for s in read write; do
            log=$dir/$s-$side-$mode.log
            if ! "$PGC_BIN/pgbench" -n -M "$mode" -c 2 -j 1 -t 40 --random-seed=4242 \
                    -D "mk=$q$mk-pgbench-$s-$mode$q" -D "pat=$q%pgbench-m1%$q" \
                    -f "$dir/$s-$side.sql" "$PGC_DB" > "$log" 2>&1; then
                echo "pgbench -M $mode $s.sql on $tab failed:"; tail -n 15 "$log"; fail=1; continue
            fi
            done_n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")
            failed_n=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$log")
            if [ "$done_n" != 80 ] || [ "${failed_n:-0}" != 0 ]; then
                echo "pgbench -M $mode $s.sql on $tab: $done_n transactions, ${failed_n:-?} failed:"; cat "$log"; fail=1
            fi
        done
    done
    [ $fail = 1 ] || echo "check: pgbench -M $mode, 2 clients: read.sql and write.sql, 80 transactions each on enc_t and plain_t, none failed"
done

# the same updates reached both tables
for side in enc plain; do
    case $side in enc) tab=enc_t ;; plain) tab=plain_t ;; esac
    "${psql[@]}" -A -t -c "SET TimeZone = 'UTC'" \
        -c "SELECT id, i4, i4o, i8, i8o, f8, num, t, tm, tr, b, d, ts, bo FROM $tab ORDER BY id" |
        sed 's/PGCMARK-[EP]/MK/g' > "$dir/final-$side.txt"
done
updated=$(grep -c 'MK-pgbench-write' "$dir/final-plain.txt" || true)
if ! cmp -s "$dir/final-enc.txt" "$dir/final-plain.txt"; then
    echo "pgbench: enc_t and plain_t differ after the same updates (< plain_t, > enc_t):"
    diff "$dir/final-plain.txt" "$dir/final-enc.txt" | head -40; fail=1
elif [ "$updated" -lt 50 ]; then
    echo "pgbench: only $updated rows updated (a bug of the test)"; fail=1
else
    echo "check: after the runs enc_t and plain_t are equal ($(wc -l < "$dir/final-enc.txt") rows, $updated updated; md5 $(md5sum < "$dir/final-enc.txt" | cut -c1-12))"
fi
exit $fail
