#!/usr/bin/env bash
# run.sh — fuzz the ciphertext parser and ORE comparison with libFuzzer.
#
#   columns/test/fuzz/run.sh [SECONDS] [WORKDIR]
#
# Needs clang with libFuzzer (Debian: clang-14 libclang-rt-14-dev).  Seeds
# the corpus with the shared test vectors, so the fuzzer starts from valid
# ciphertexts of every type and level.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../src
seconds=${1:-600}
work=${2:-$(mktemp -d)}
clang=$(command -v clang || command -v clang-14)
mkdir -p "$work/corpus"

"$clang" -g -O1 -fsanitize=fuzzer,address,undefined -I"$src" \
    "$here/fuzz_compare.c" "$src/ciphertext.c" "$src/ore.c" -lcrypto -o "$work/fuzz_compare"

# seeds: pairs of vectors of one type and level, as the target splits them
python3 - "$here/../data/vectors.csv" "$work/corpus" <<'PY'
import base64, csv, sys, itertools
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    groups.setdefault((r['type'], r['level']), []).append(base64.b64decode(r['ct']))
i = 0
for values in groups.values():
    for a, b in itertools.islice(zip(values, values[1:]), 4):
        open(f"{sys.argv[2]}/seed{i}", "wb").write(len(a).to_bytes(2, "big") + a + b)
        i += 1
PY

echo "fuzz: $seconds s, corpus $(find "$work/corpus" -type f | wc -l) seeds, work dir $work"
"$work/fuzz_compare" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work/corpus"
