"""report.md (and the plots) from a results directory."""

import os
import re

from bench import vendor_reports
from bench.runner import load_results
from bench.scenarios import SCENARIOS, common

# results.json written before rounds alternated has no meta "order"
OLD_ORDER = "A B A B"


def write_report(out_dir):
    data = load_results(out_dir)
    meta, rows = data["meta"], data["results"]
    info = meta["system"]
    order = meta.get("order", OLD_ORDER)
    order_text = "ABBA: A B C in odd rounds, C B A in even ones" if order == "ABBA" else order + " …"
    md = [
        f"# pgcipher benchmark report ({meta['profile']} profile)",
        "",
        f"Run {meta['started']} – {meta.get('finished', '?')}.  Stock PostgreSQL and pgcipher built from the "
        "same source with the same compiler and flags; each comparison uses a fresh cluster per "
        "configuration with identical postgresql.conf (warm-up runs as each scenario states), and configurations interleaved "
        f"({order_text}) over the rounds.  Numbers are medians of the rounds; ratios come with a 95% "
        "percentile-bootstrap confidence interval (2000 resamples).  A verdict column says *inside the noise* "
        "when a ratio's CI overlaps the band from 1.0 to the CI of stock-2 / stock at the same point (a second, "
        "identical stock server; 1.0 alone where none ran), *slower* or *faster* when it lies wholly outside, "
        "*too few rounds* with one value per side.  Raw repetitions: `results.csv`, "
        "`results.json`.",
        "",
        # the open-source peer, where it ran (bench/peer)
        *([meta["peer"], ""] if meta.get("peer") else []),
        *[f"Amended: {a}" for a in meta.get("amendments", [])],
        *([""] if meta.get("amendments") else []),
        "## Machine and software",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {info['cpu_model']}, {info['cpu_count']} logical CPUs, AES-NI: {'yes' if info['aes_ni'] else 'no'}"
        f"{', VAES' if info.get('vaes') else ''} |",
        f"| memory | {info['memory_gib']} GiB |",
        f"| OS, kernel | {info['os']}, {info['kernel']} |",
        f"| OpenSSL (the machine's) | {info['openssl']} |",
    ]
    for name, inst in info["installs"].items():
        md.append(
            f"| {name} | {inst['version']}, {inst['compiler_version']}, CFLAGS `{inst['cflags']}`"
            + (f", linked with {inst['openssl']} (`{inst['libcrypto']}`)" if inst.get("openssl") else "")
            + " |"
        )
    for name, inst in info["installs"].items():
        md.append(f"| {name} configure | `{inst['configure']}` |")
    md.append("")
    for name, params in meta["scenarios"].items():
        mod = SCENARIOS[name]
        srows = [r for r in rows if r["scenario"] == name]
        md += [f"## {name}: {mod.TITLE}", ""]
        if mod.SEED:
            md += [f"Reproduces {vendor_reports.citation(mod.SEED)} (see bench/README.md).", ""]
        if not srows:
            md += ["No results (scenario failed or was interrupted).", ""]
            continue
        params = dict(params, order=params.get("order", order))
        text, pngs = mod.report(srows, params, out_dir)
        md += [text, ""]
        # a second, identical stock server measured: say what noise alone does
        if any(r["config"] == common.NOISE for r in srows):
            metric = getattr(mod, "METRIC", None) or next(
                r["metric"] for r in srows if r["config"] == common.NOISE
            )
            floor = common.noise_floor_paragraph(srows, metric)
            if floor:
                md += [floor, ""]
        for png in pngs:
            md += [f"![{png}]({png})", ""]
        settings = data["settings"].get(name)
        if settings:
            md += [
                "postgresql.conf for every configuration of this scenario (on top of initdb's): "
                + ", ".join(f"`{k} = {v}`" for k, v in settings.items()),
                "",
            ]
    commands = list(dict.fromkeys(re.sub(r" -p \d+ ", " -p $PORT ", c) for c in data["commands"]))
    md += ["## Commands run", "", "```"] + commands + ["```", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    return path
