"""summarize.py — the tables of a many-core run (bench/device/many_cores.py)
from its results.json: TPS per round, medians, ratios with the suite's
95 % percentile-bootstrap CI (bench/stats.py, seeded) and the min–max of
the per-round ratios (round r of one configuration over round r of the
other).

Usage: python3 bench/device/summarize.py RESULTS_DIR_OR_JSON [--plot DIR]
  (markdown on stdout; --plot: many-cores-alibaba.png into DIR, which needs
  matplotlib: the bench suite's venv)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
try:  # bench.scenarios imports the plots, which need matplotlib; nothing here draws
    import matplotlib  # noqa: F401
except ImportError:
    import types

    import bench

    bench.plots = sys.modules["bench.plots"] = types.ModuleType("bench.plots")

from bench import stats  # noqa: E402
from bench.scenarios.alibaba_sysbench import ALIBABA, TARGETS  # noqa: E402


def _per_round(rows, **match):
    """{round: value} of the rows matching every key."""
    return {r["rep"]: r["value"] for r in rows if all(r.get(k) == v for k, v in match.items())}


def _fmt_rounds(d, fmt="{:,.0f}"):
    return " / ".join(fmt.format(d[k]) for k in sorted(d)) or "–"


def _ratio_cols(t, b):
    """ratio of medians (95 % CI) and per-round min–max of t / b."""
    if not t or not b:
        return "–", "–"
    s = stats.summarize(list(t.values()), list(b.values()))
    per = [t[k] / b[k] for k in sorted(t) if k in b and b[k]]
    rng = f"{min(per):.3f}–{max(per):.3f}" if per else "–"
    return f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})", rng


def _med(d, fmt="{:,.0f}"):
    return fmt.format(stats.median(list(d.values()))) if d else "–"


def _alibaba_point(rows, s, w, t):
    """Per round at one point (scenario s, workload w, t threads): TPS
    plain-direct and enc-proxy, the server's µs/tx of each, the proxy's."""
    pl = _per_round(rows, config="plain-direct", case="plain", workload=w, threads=t, metric="tps")
    en = _per_round(rows, config="enc-proxy", case=s, workload=w, threads=t, metric="tps")
    spl = _per_round(
        rows, config="plain-direct", case="plain", workload=w, threads=t, metric="server_cpu_us_per_tx"
    )
    sen = _per_round(rows, config="enc-proxy", case=s, workload=w, threads=t, metric="server_cpu_us_per_tx")
    prx = _per_round(rows, config="enc-proxy", case=s, workload=w, threads=t, metric="proxy_cpu_us_per_tx")
    return pl, en, spl, sen, prx


def alibaba_table(rows):
    rows = [r for r in rows if r["scenario"] == "alibaba-sysbench" and r.get("part") == "timed"]
    if not rows:
        return ["(no alibaba-sysbench measurements)"]
    pairs = []
    for r in rows:
        if r["config"] == "enc-proxy" and (r["case"], r["workload"]) not in pairs:
            pairs.append((r["case"], r["workload"]))
    threads = sorted({r["threads"] for r in rows})
    md = [
        "| scenario | workload | threads | plain-direct TPS per round | enc-proxy TPS per round | "
        "median plain / enc | enc / plain (95 % CI) | per-round min–max | target | Alibaba | "
        "server µs/tx plain / enc | server CPU plain ÷ enc (a) | proxy µs/tx |",
        "|" + "---|" * 13,
    ]
    for s, w in pairs:
        for t in threads:
            pl, en, spl, sen, prx = _alibaba_point(rows, s, w, t)
            if not pl and not en:
                continue
            ratio, rng = _ratio_cols(en, pl)
            cpu_ratio = (
                f"{stats.median(list(spl.values())) / stats.median(list(sen.values())):.3f}"
                if spl and sen
                else "–"
            )
            lo, hi = ALIBABA.get((s, w), (float("nan"), float("nan")))
            md.append(
                f"| {s} | {w} | {t} | {_fmt_rounds(pl)} | {_fmt_rounds(en)} | {_med(pl)} / {_med(en)} | "
                f"{ratio} | {rng} | ≥ {TARGETS.get((s, w), float('nan')):.2f} | {lo:.2f}–{hi:.2f} | "
                f"{_med(spl)} / {_med(sen)} | {cpu_ratio} | {_med(prx)} |"
            )
    return md


def pgbench_table(rows):
    cpu_rows = [
        r for r in rows if r["scenario"] == "cybertec-pgbench" and r["metric"] == "server_cpu_us_per_tx"
    ]
    rows = [r for r in rows if r["scenario"] == "cybertec-pgbench" and r["metric"] == "tps"]
    if not rows:
        return ["(no pgbench measurements)"]
    cfgs = []
    for r in rows:
        if r["config"] not in cfgs:
            cfgs.append(r["config"])
    md = [
        "| workload | clients | "
        + " | ".join(f"{c} TPS per round" for c in cfgs)
        + " | aes-256 / stock (95 % CI) | per-round min–max | stock-2 / stock (95 % CI) | per-round min–max | verdict | "
        + "server µs/tx "
        + " / ".join(cfgs)
        + " |",
        "|" + "---|" * (2 + len(cfgs) + 6),
    ]
    points = []
    for r in rows:
        if (r["workload"], r["clients"]) not in points:
            points.append((r["workload"], r["clients"]))
    for w, n in points:
        v = {c: _per_round(rows, config=c, workload=w, clients=n) for c in cfgs}
        cpu = {c: _per_round(cpu_rows, config=c, workload=w, clients=n) for c in cfgs}
        enc, enc_rng = _ratio_cols(v.get("aes-256"), v.get("stock"))
        noise, noise_rng = _ratio_cols(v.get("stock-2"), v.get("stock"))
        verdict = "–"
        if v.get("aes-256") and v.get("stock"):
            se = stats.summarize(list(v["aes-256"].values()), list(v["stock"].values()))
            sn = (
                stats.summarize(list(v["stock-2"].values()), list(v["stock"].values()))
                if v.get("stock-2")
                else None
            )
            verdict = stats.verdict(se, sn)
        md.append(
            f"| {w} | {n} | "
            + " | ".join(_fmt_rounds(v[c]) for c in cfgs)
            + f" | {enc} | {enc_rng} | {noise} | {noise_rng} | {verdict} | "
            + " / ".join(_med(cpu.get(c, {}), "{:.1f}") for c in cfgs)
            + " |"
        )
    return md


def hop_table(rows):
    """The hop alone: the plaintext table through the proxy vs direct."""
    rows = [r for r in rows if r["scenario"] == "alibaba-sysbench" and r.get("part") == "timed"]
    proxied = [r for r in rows if r["config"] == "plain-proxy"]
    if not proxied:
        return []
    md = [
        "| workload | threads | plain-direct TPS per round | plain-proxy TPS per round | "
        "proxy / direct TPS (95 % CI) | per-round min–max | server µs/tx direct / proxy | proxy µs/tx |",
        "|" + "---|" * 8,
    ]
    for w in sorted({r["workload"] for r in proxied}):
        for t in sorted({r["threads"] for r in proxied if r["workload"] == w}):
            v = {
                cfg: _per_round(rows, config=cfg, case="plain", workload=w, threads=t, metric="tps")
                for cfg in ("plain-direct", "plain-proxy")
            }
            cpu = {
                cfg: _per_round(
                    rows, config=cfg, case="plain", workload=w, threads=t, metric="server_cpu_us_per_tx"
                )
                for cfg in ("plain-direct", "plain-proxy")
            }
            prx = _per_round(
                rows, config="plain-proxy", case="plain", workload=w, threads=t, metric="proxy_cpu_us_per_tx"
            )
            ratio, rng = _ratio_cols(v["plain-proxy"], v["plain-direct"])
            md.append(
                f"| {w} | {t} | {_fmt_rounds(v['plain-direct'])} | {_fmt_rounds(v['plain-proxy'])} | "
                f"{ratio} | {rng} | {_med(cpu['plain-direct'])} / {_med(cpu['plain-proxy'])} | {_med(prx)} |"
            )
    return md


def tprocc_table(rows):
    rows = [r for r in rows if r["scenario"] == "tproc-c"]
    ramp = [r for r in rows if r.get("phase") == "ramp"]
    if not ramp:
        return []
    cfgs = []
    for r in ramp:
        if r["config"] not in cfgs:
            cfgs.append(r["config"])
    base = "stock" if "stock" in cfgs else cfgs[0]
    others = [c for c in cfgs if c != base]
    md = [
        "| VUs | "
        + " | ".join(f"{c} NOPM per round" for c in cfgs)
        + "".join(
            f" | {c} / {base} NOPM (95 % CI) | per-round min–max | {c} / {base} TPM (95 % CI)" for c in others
        )
        + " | verdict | server µs/tx "
        + " / ".join(cfgs)
        + " |",
        "|" + "---|" * (1 + len(cfgs) + 3 * len(others) + 2),
    ]
    for n in sorted({r["vus"] for r in ramp}):
        nopm = {c: _per_round(ramp, config=c, vus=n, metric="nopm") for c in cfgs}
        tpm = {c: _per_round(ramp, config=c, vus=n, metric="tpm") for c in cfgs}
        cpu = {c: _per_round(ramp, config=c, vus=n, metric="server_cpu_us_per_tx") for c in cfgs}
        cols, verdicts = [], []
        for c in others:
            ratio, rng = _ratio_cols(nopm[c], nopm[base])
            tratio, _ = _ratio_cols(tpm[c], tpm[base])
            cols += [ratio, rng, tratio]
            if nopm[c] and nopm[base]:
                verdicts.append(
                    stats.verdict(stats.summarize(list(nopm[c].values()), list(nopm[base].values())))
                )
        md.append(
            f"| {n} | "
            + " | ".join(_fmt_rounds(nopm[c]) for c in cfgs)
            + "".join(f" | {x}" for x in cols)
            + f" | {'; '.join(verdicts) or '–'} | "
            + " / ".join(_med(cpu[c], "{:.0f}") for c in cfgs)
            + " |"
        )
    checks = [r for r in rows if r["metric"] == "consistency_ok"]
    counts = [r for r in rows if r["metric"] == "initial_counts_ok"]
    md.append("")
    md.append(
        "Initial row counts: "
        + ("as specified" if counts and all(r["value"] == 1 for r in counts) else "WRONG or not checked")
        + "; TPC-C consistency conditions 1-4 and 6 after the runs: "
        + (
            ", ".join(
                f"{r['config']} {'hold' if r['value'] == 1 else 'VIOLATED (' + r.get('detail', '') + ')'}"
                for r in checks
            )
            or "not checked"
        )
        + "."
    )
    return md


def summary(data):
    meta, rows = data["meta"], data["results"]
    md = [
        f"Run {meta.get('started')} – {meta.get('finished')} ({meta.get('elapsed_s')} s), nproc {meta.get('nproc')}."
    ]
    md.append(
        f"Placement: {json.dumps(meta.get('placement'))}; affinity test: {json.dumps(meta.get('affinity'))}."
    )
    for k in (
        "alibaba_placement",
        "pgbench_placement",
        "pgbench_libcrypto",
        "tprocc_placement",
        "alibaba_cut_at",
        "tprocc_cut_at",
        "pgbench_cut_at",
        "failed",
    ):
        if k in meta:
            md.append(f"{k}: {json.dumps(meta[k])}")
    md += ["", "## alibaba-sysbench", ""] + alibaba_table(rows)
    hop = hop_table(rows)
    if hop:
        md += ["", "## the hop alone: the plaintext table through pgcipher-proxy", ""] + hop
    tpcc = tprocc_table(rows)
    if tpcc:
        md += ["", "## tproc-c", ""] + tpcc
    md += ["", "## cybertec-pgbench", ""] + pgbench_table(rows)
    unsettled = [r for r in rows if r["metric"] == "server_cpu_settled" and r["value"] != 1]
    if unsettled:
        md += ["", f"Server CPU readings that did not settle within the timeout: {len(unsettled)}."]
    return "\n".join(md) + "\n"


def plot_alibaba(rows, out_dir):
    """many-cores-alibaba.png: per scenario and workload, against threads,
    the server CPU ratio plain ÷ enc-proxy (a) and the TPS ratio
    enc-proxy / plain-direct (b, with its 95 % CI); None where nothing ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["scenario"] == "alibaba-sysbench" and r.get("part") == "timed"]
    pairs = []
    for r in rows:
        if (
            r["config"] == "enc-proxy"
            and r["workload"] != "write"
            and (r["case"], r["workload"]) not in pairs
        ):
            pairs.append((r["case"], r["workload"]))
    if not pairs:
        return None
    threads = sorted({r["threads"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for i, (s, w) in enumerate(pairs):
        a, b, lo, hi = [], [], [], []
        for t in threads:
            pl, en, spl, sen, _ = _alibaba_point(rows, s, w, t)
            a.append(
                stats.median(list(spl.values())) / stats.median(list(sen.values()))
                if spl and sen
                else float("nan")
            )
            sm = stats.summarize(list(en.values()), list(pl.values())) if en and pl else None
            b.append(sm["ratio"] if sm else float("nan"))
            lo.append(sm["ratio"] - sm["ci_low"] if sm else 0)
            hi.append(sm["ci_high"] - sm["ratio"] if sm else 0)
        color = f"C{i}"
        axes[0].plot(threads, a, marker="o", color=color, label=f"{s} {w}")
        axes[1].errorbar(threads, b, yerr=[lo, hi], marker="o", color=color, capsize=3, label=f"{s} {w}")
    for ax, title in zip(
        axes,
        [
            "(a) server CPU per transaction, plain ÷ encrypted",
            "(b) TPS, encrypted through the proxy ÷ plain (95% CI)",
        ],
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads, [str(t) for t in threads])
        ax.set_xlabel("sysbench threads")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ratio (1.0 = as plaintext)")
    axes[1].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    name = "many-cores-alibaba.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def main(argv):
    path = argv[1]
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    with open(path) as f:
        data = json.load(f)
    if len(argv) > 3 and argv[2] == "--plot":
        print(plot_alibaba(data["results"], argv[3]) or "(no alibaba-sysbench measurements to plot)")
        return
    print(summary(data), end="")


if __name__ == "__main__":
    main(sys.argv)
