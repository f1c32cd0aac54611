"""Helpers shared by the pgbench-driven scenarios."""

from bench import peer, stats
from bench.cluster import STANDARD_CONFIGS

PGBENCH_TABLES = ["pgbench_accounts", "pgbench_branches", "pgbench_history", "pgbench_tellers"]


def configs(names):
    return [STANDARD_CONFIGS[n] for n in names]


def start_clusters(run, scenario, config_list, settings):
    """A fresh cluster per configuration, all running, same settings."""
    clusters = {}
    for cfg in config_list:
        c = run.cluster(cfg, settings, scenario)
        c.initdb()
        c.start()
        clusters[cfg.name] = c
        run.progress.note(f"{scenario}: started {cfg.name} ({c.install.name} binaries) on port {c.port}")
    return clusters


def pgbench_init(run, scenario, clusters, scale):
    for name, c in clusters.items():
        _, cmd, _ = c.pgbench(["-i", "-q", "-s", str(scale)], timeout=7200)
        run.command(cmd.replace(c.dir, "$CLUSTER"))
        c.psql("VACUUM ANALYZE")
        c.psql("CHECKPOINT")
        run.progress.note(
            f"{scenario}: {name} initialized at scale {scale} "
            f"({c.psql('SELECT pg_size_pretty(pg_database_size(current_database()))')})"
        )
        check_peer(run, scenario, c, PGBENCH_TABLES + ["pgbench_accounts_pkey"])


def check_peer(run, scenario, c, tables, db="postgres"):
    """On a peer's cluster (open_pg_tde), fail unless every table is tde_heap
    and encrypted, as the peer itself reports it; a progress line says so."""
    if c.config.peer:
        run.progress.note(f"{scenario}: {c.config.name}: {peer.check_encrypted(c, tables, db)}")


def stop_all(clusters):
    for c in clusters.values():
        c.destroy()


# The noise floor: a second, identical stock server measured in the same
# rounds as stock (bench/cluster.py); what stock-2 / stock shows is what
# this machine alone does to a ratio.
BASELINE, NOISE, TREATMENT = "stock", "stock-2", "aes-256"
# what the summaries call the configurations besides the baseline
LABELS = {
    NOISE: "a second, identical stock server: the noise floor",
    "pgcipher-off": "pgcipher with encryption off",
    peer.NAME: f"the open-source peer, open_pg_tde {peer.VERSION}",
}
# row fields that are not parameters of a measurement point
_NOT_POINT = ("scenario", "config", "rep", "metric", "value", "detail")


def ratio_table(
    rows,
    baseline,
    configs_order,
    group_keys,
    metric="tps",
    fmt_value="{:,.0f}",
    verdicts=False,
    noise=NOISE,
    higher_is_better=True,
):
    """Markdown table: one line per group, medians per configuration and the
    ratio to the baseline with its 95% bootstrap CI.  With verdicts, a
    column per configuration (other than the baseline and the noise floor)
    with stats.verdict against 1.0 and, where the noise configuration was
    measured at that point, its ratio's CI; each summary gets "verdict"."""
    groups = []
    for r in rows:
        if r["metric"] != metric:
            continue
        g = tuple(r.get(k) for k in group_keys)
        if g not in groups:
            groups.append(g)
    judged = [c for c in configs_order if c not in (baseline, noise)] if verdicts else []
    head = (
        "| "
        + " | ".join(group_keys)
        + " | "
        + " | ".join(configs_order)
        + " | "
        + " | ".join(f"{c} / {baseline} (95% CI)" for c in configs_order if c != baseline)
        + " |"
    )
    if judged:
        head += " " + " | ".join("verdict" if len(judged) == 1 else f"verdict {c}" for c in judged) + " |"
    sep = "|" + "---|" * (len(group_keys) + len(configs_order) + len(configs_order) - 1 + len(judged))
    lines = [head, sep]
    summaries = {}
    for g in groups:
        vals = {
            c: [
                r["value"]
                for r in rows
                if r["metric"] == metric and r["config"] == c and tuple(r.get(k) for k in group_keys) == g
            ]
            for c in configs_order
        }
        cells = [str(x) for x in g]
        cells += [fmt_value.format(stats.median(vals[c])) if vals[c] else "–" for c in configs_order]
        for c in configs_order:
            if c == baseline:
                continue
            s = stats.summarize(vals[c], vals[baseline])
            summaries[(g, c)] = s
            cells.append(
                f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})"
                if vals[c] and vals[baseline]
                else "–"
            )
        for c in judged:
            floor = summaries.get((g, noise)) if vals.get(noise) else None
            v = stats.verdict(summaries[(g, c)], floor, higher_is_better)
            summaries[(g, c)]["verdict"] = v
            cells.append(v if vals[c] and vals[baseline] else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), summaries


def geomean_summary(summaries, configs_order, baseline):
    """One line per configuration: geometric mean of its per-point ratios,
    with the range of the points; stock-2 against stock shows how much two
    identical servers differ on this machine (the noise floor)."""
    import math

    lines = []
    for c in configs_order:
        if c == baseline:
            continue
        ratios = [s["ratio"] for (g, cfg), s in summaries.items() if cfg == c and s["ratio"] == s["ratio"]]
        if ratios:
            gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            label = f" ({LABELS[c]})" if c in LABELS else ""
            verdicts = [s["verdict"] for (g, cfg), s in summaries.items() if cfg == c and "verdict" in s]
            counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
            lines.append(
                f"- {c} / {baseline}{label}: geometric mean {gm:.3f} over {len(ratios)} points "
                f"(points range {min(ratios):.3f}–{max(ratios):.3f})"
                + (f"; verdicts: {counts}" if counts else "")
            )
    return "\n".join(lines)


def summary_at(rows, metric, match, treatment=TREATMENT, baseline=BASELINE):
    """stats.summarize of treatment / baseline over the rows of one point
    (every key of match equal)."""

    def values(cfg):
        return [
            r["value"]
            for r in rows
            if r["metric"] == metric and r["config"] == cfg and all(r.get(k) == v for k, v in match.items())
        ]

    return stats.summarize(values(treatment), values(baseline))


def extra_rounds(run, scenario, p, cfgs, points, summary_of, measure, expected_seconds, describe=str):
    """More rounds where the planned ones could not tell: after the planned
    p["repetitions"] rounds, every point whose aes-256 / stock CI holds 1.0
    and is wider than the effect (stats.ci_wider_than_effect) gets further
    interleaved rounds of stock, stock-2 and aes-256 (the configurations the
    verdict compares), in ABBA pairs, re-checked after each pair, up to
    p["max_extra_rounds"].  Rounds are numbered on from the planned ones.
    summary_of(point) -> summary; measure(rep, point, cfg) runs and records
    one measurement (and its progress step).  Returns the rounds added."""
    limit = p.get("max_extra_rounds", 0)
    names = [c.name for c in cfgs]
    if not limit or BASELINE not in names or TREATMENT not in names:
        return 0
    from bench.interleave import interleaved

    extra_cfgs = [c for c in cfgs if c.name in (BASELINE, NOISE, TREATMENT)]
    done = 0
    while done < limit:
        n = min(2, limit - done)
        todo = []
        for point in points:
            s = summary_of(point)
            if stats.ci_wider_than_effect(s):
                todo.append(point)
                run.progress.note(
                    f"{scenario} {describe(point)}: {TREATMENT} / {BASELINE} {s['ratio']:.3f}, 95% CI "
                    f"{s['ci_low']:.3f}–{s['ci_high']:.3f} holds 1.0 and is wider than the effect "
                    f"after {p['repetitions'] + done} rounds: {n} more round(s) of "
                    + " ".join(c.name for c in extra_cfgs)
                )
        if not todo:
            break
        steps = n * len(todo) * len(extra_cfgs)
        run.progress.extend(steps, steps * expected_seconds)
        for rep, point, cfg in interleaved(extra_cfgs, n, todo, first=p["repetitions"] + done + 1):
            measure(rep, point, cfg)
        done += n
    return done


def noise_floor_paragraph(rows, metric, baseline=BASELINE, noise=NOISE):
    """The "Noise floor" paragraph of a scenario's report: stock-2 / stock per
    point with its CI, or None where stock-2 was not measured."""
    rows = [r for r in rows if r["metric"] == metric and r["config"] in (baseline, noise)]
    if not any(r["config"] == noise for r in rows) or not any(r["config"] == baseline for r in rows):
        return None
    keys = []
    for r in rows:
        keys += [k for k in r if k not in _NOT_POINT and k not in keys]
    _, summaries = ratio_table(rows, baseline, [baseline, noise], keys, metric=metric)
    # name points by the parameters that differ between them
    groups = [g for (g, c) in summaries]
    varying = [i for i in range(len(keys)) if len({g[i] for g in groups}) > 1]
    parts = []
    for (g, _c), s in summaries.items():
        if s["ratio"] != s["ratio"]:
            continue
        name = " ".join(f"{keys[i]} {g[i]}" if isinstance(g[i], (int, float)) else str(g[i]) for i in varying)
        parts.append(f"{name + ' ' if name else ''}{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})")
    if not parts:
        return None
    widest = max(
        max(1 - s["ci_low"], s["ci_high"] - 1) for s in summaries.values() if s["ratio"] == s["ratio"]
    )
    return (
        f"**Noise floor.** {noise} is a second stock server, identical to {baseline}, measured in the "
        f"same interleaved rounds; {noise} / {baseline} ({metric}, 95% CI) is what this machine's noise "
        f"alone does to a ratio: " + "; ".join(parts) + f".  Its CIs reach {widest * 100:.1f} % from 1.0.  "
        "A ratio is *inside the noise* when its CI overlaps the band from 1.0 to the noise floor's CI at "
        "the same point, *slower* or *faster* only when it lies wholly outside it (the verdict column)."
    )


def vals(rows, config, metric, **match):
    """The values of metric for config among rows, where every key of match
    has that value."""
    return [
        r["value"]
        for r in rows
        if r["config"] == config and r["metric"] == metric and all(r.get(k) == v for k, v in match.items())
    ]


def med(rows, config, metric, fmt="{:,.0f}", **match):
    """The median of vals(...), formatted; "–" when there is none."""
    v = vals(rows, config, metric, **match)
    return fmt.format(stats.median(v)) if v else "–"
