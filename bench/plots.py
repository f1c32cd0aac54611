"""PNG plots for the report (matplotlib, no display needed)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench import stats  # noqa: E402

COLORS = {
    "stock": "#444444",
    "stock-2": "#aaaaaa",
    "pgcipher-off": "#1f77b4",
    "aes-128": "#2ca02c",
    "aes-256": "#d62728",
    "open_pg_tde": "#17becf",
    "open_pg_tde+checksums": "#17becf",
    "proxy": "#9467bd",
    "pgbouncer": "#8c564b",
    "enc-proxy": "#d62728",
    "plain-proxy": "#9467bd",
    "enc-direct": "#ff7f0e",
}


def _color(name, i):
    return COLORS.get(name, f"C{i}")


def _lines(xs, series, path, title, xlabel, ylabel, log2=False):
    """One line per configuration: series is [(name, [y per x])]."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, ys) in enumerate(series):
        ax.plot(xs, ys, marker="o", label=name, color=_color(name, i))
    if log2:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _median_series(points, configs, xkey, xs):
    return [
        (cfg, [stats.median([r["value"] for r in points if r["config"] == cfg and r[xkey] == x]) for x in xs])
        for cfg in configs
    ]


def tps_vs_clients(rows, workload, scale, configs, path, title):
    pts = [
        r for r in rows if r["metric"] == "tps" and r.get("workload") == workload and r.get("scale") == scale
    ]
    if not pts:
        return False
    clients = sorted({r["clients"] for r in pts})
    return _lines(
        clients,
        _median_series(pts, configs, "clients", clients),
        path,
        title,
        "clients",
        "TPS (median)",
        log2=True,
    )


def overhead_bars(summaries, path, title, targets=None):
    """summaries: {(group tuple, config): stats.summarize(...)}; bars of the
    ratio - 1 in percent, with the CI as error bars.  targets: optional
    {group tuple: ratio}, drawn as a mark on each bar of that group."""
    if not summaries:
        return False
    labels, vals, lo, hi, colors, marks = [], [], [], [], [], []
    for i, ((group, cfg), s) in enumerate(summaries.items()):
        if s["ratio"] != s["ratio"]:  # NaN
            continue
        if targets and group in targets:
            marks.append((len(labels), (targets[group] - 1) * 100))
        labels.append(" ".join([str(g) for g in group] + [cfg]))
        v = (s["ratio"] - 1) * 100
        vals.append(v)
        lo.append(v - (s["ci_low"] - 1) * 100)
        hi.append((s["ci_high"] - 1) * 100 - v)
        colors.append(_color(cfg, i))
    return _hbars(
        labels,
        vals,
        path,
        title,
        "difference from baseline, % (negative = slower)",
        colors,
        xerr=[lo, hi],
        marks=marks,
    )


def _hbars(labels, values, path, title, xlabel, colors, xerr=None, marks=None):
    """Horizontal bars, first label on top; with xerr, error bars and a zero
    line; marks: [(bar index, x)] drawn as black ticks (targets)."""
    fig, ax = plt.subplots(figsize=(8, max(3, 0.28 * len(labels) + 1.2)))
    y = list(range(len(labels)))
    ax.barh(y, values, xerr=xerr, color=colors, alpha=0.8, capsize=2)
    if marks:
        ax.plot(
            [x for _, x in marks],
            [i for i, _ in marks],
            linestyle="none",
            marker="|",
            markersize=14,
            markeredgewidth=2,
            color="darkorange",
            label="target",
        )
        ax.legend(fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    if xerr is not None:
        ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def ramp(rows, metric, configs, path, title, xkey="vus"):
    pts = [r for r in rows if r["metric"] == metric and r.get("phase") == "ramp"]
    if not pts:
        return False
    xs = sorted({r[xkey] for r in pts})
    return _lines(
        xs, _median_series(pts, configs, xkey, xs), path, title, "virtual users", metric.upper() + " (median)"
    )


def bars(labels, values, path, title, xlabel):
    return _hbars(labels, values, path, title, xlabel, [f"C{i % 10}" for i in range(len(labels))])
