"""Helpers shared by the pgbench-driven scenarios."""
from bench.cluster import STANDARD_CONFIGS
from bench import stats


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
        run.progress.note(f"{scenario}: {name} initialized at scale {scale} "
                          f"({c.psql('SELECT pg_size_pretty(pg_database_size(current_database()))')})")


def stop_all(clusters):
    for c in clusters.values():
        c.destroy()


def ratio_table(rows, baseline, configs_order, group_keys, metric="tps", fmt_value="{:,.0f}"):
    """Markdown table: one line per group, medians per configuration and the
    ratio to the baseline with its 95% bootstrap CI."""
    groups = []
    for r in rows:
        if r["metric"] != metric:
            continue
        g = tuple(r.get(k) for k in group_keys)
        if g not in groups:
            groups.append(g)
    head = "| " + " | ".join(group_keys) + " | " + " | ".join(configs_order) + " | " + \
        " | ".join(f"{c} / {baseline} (95% CI)" for c in configs_order if c != baseline) + " |"
    sep = "|" + "---|" * (len(group_keys) + len(configs_order) + len(configs_order) - 1)
    lines = [head, sep]
    summaries = {}
    for g in groups:
        vals = {c: [r["value"] for r in rows if r["metric"] == metric and r["config"] == c
                    and tuple(r.get(k) for k in group_keys) == g] for c in configs_order}
        cells = [str(x) for x in g]
        cells += [fmt_value.format(stats.median(vals[c])) if vals[c] else "–" for c in configs_order]
        for c in configs_order:
            if c == baseline:
                continue
            s = stats.summarize(vals[c], vals[baseline])
            summaries[(g, c)] = s
            cells.append(f"{s['ratio']:.3f} ({s['ci_low']:.3f}–{s['ci_high']:.3f})" if vals[c] and vals[baseline] else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), summaries


def geomean_summary(summaries, configs_order, baseline):
    """One line per configuration: geometric mean of its per-point ratios,
    with the range of the points; pgcipher-off against stock shows how much
    two identical servers differ on this machine (the noise floor)."""
    import math
    lines = []
    for c in configs_order:
        if c == baseline:
            continue
        ratios = [s["ratio"] for (g, cfg), s in summaries.items() if cfg == c and s["ratio"] == s["ratio"]]
        if ratios:
            gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            lines.append(f"- {c} / {baseline}: geometric mean {gm:.3f} over {len(ratios)} points "
                         f"(points range {min(ratios):.3f}–{max(ratios):.3f})")
    return "\n".join(lines)
