"""vcpu_placement_plot.py — results.json and a plot from the lines
vcpu_placement.sh prints ("round N PLACEMENT TPS tps"), so that its
report has its raw results in the suite's form and a picture.

Usage: build/venv/bin/python bench/experiments/vcpu_placement_plot.py OUTPUT.txt DIR
writes DIR/results.json ({"results": [{placement, round, tps}]}) and
DIR/vcpu-placement.png (each round's TPS per placement, the median marked).
"""

import json
import os
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"^round (\d+) (\S+)\s+(\d+) tps$")


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                rows.append({"placement": m.group(2), "round": int(m.group(1)), "tps": int(m.group(3))})
    return rows


def main(argv):
    rows = parse(argv[1])
    out = argv[2]
    if not rows:
        sys.exit(f"no 'round N PLACEMENT TPS tps' lines in {argv[1]}")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"source": os.path.basename(argv[1]), "results": rows}, f, indent=1)
        f.write("\n")
    places = list(dict.fromkeys(r["placement"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for i, p in enumerate(places):
        v = [r["tps"] for r in rows if r["placement"] == p]
        ax.scatter([i] * len(v), v, color="C0", alpha=0.6, s=18)
        ax.hlines(statistics.median(v), i - 0.3, i + 0.3, color="black")
    ax.set_xticks(range(len(places)), places)
    ax.set_ylabel("pgbench -S TPS")
    ax.set_title("select-only at 2 clients on 2 vCPUs, by placement (dots: rounds; bar: median)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "vcpu-placement.png"), dpi=110)
    print(os.path.join(out, "vcpu-placement.png"))


if __name__ == "__main__":
    main(sys.argv)
