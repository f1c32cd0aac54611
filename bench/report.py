"""report.md (and the plots) from a results directory."""
import os
import re

from bench.runner import load_results
from bench.scenarios import SCENARIOS


def write_report(out_dir):
    data = load_results(out_dir)
    meta, rows = data["meta"], data["results"]
    info = meta["system"]
    md = [f"# pgcipher benchmark report ({meta['profile']} profile)", "",
          f"Run {meta['started']} – {meta.get('finished', '?')}.  Stock PostgreSQL and pgcipher built from the "
          "same source with the same compiler and flags; each comparison uses a fresh cluster per "
          "configuration with identical postgresql.conf (warm-up runs as each scenario states), and configurations interleaved "
          "(A B A B …) over the rounds.  Numbers are medians of the rounds; ratios come with a 95% "
          "percentile-bootstrap confidence interval (2000 resamples).  Raw repetitions: `results.csv`, "
          "`results.json`.", "",
          *[f"Amended: {a}" for a in meta.get("amendments", [])],
          *([""] if meta.get("amendments") else []),
          "## Machine and software", "",
          "| | |", "|---|---|",
          f"| CPU | {info['cpu_model']}, {info['cpu_count']} logical CPUs, AES-NI: {'yes' if info['aes_ni'] else 'no'}"
          f"{', VAES' if info.get('vaes') else ''} |",
          f"| memory | {info['memory_gib']} GiB |",
          f"| OS, kernel | {info['os']}, {info['kernel']} |",
          f"| OpenSSL | {info['openssl']} |"]
    for name, inst in info["installs"].items():
        md.append(f"| {name} | {inst['version']}, {inst['compiler_version']}, CFLAGS `{inst['cflags']}` |")
    for name, inst in info["installs"].items():
        md.append(f"| {name} configure | `{inst['configure']}` |")
    md.append("")
    for name, params in meta["scenarios"].items():
        mod = SCENARIOS[name]
        srows = [r for r in rows if r["scenario"] == name]
        md += [f"## {name}: {mod.TITLE}", ""]
        if mod.SEED:
            md += [f"Reproduces `shared/seeds/{mod.SEED}` (see bench/README.md).", ""]
        if not srows:
            md += ["No results (scenario failed or was interrupted).", ""]
            continue
        text, pngs = mod.report(srows, params, out_dir)
        md += [text, ""]
        for png in pngs:
            md += [f"![{png}]({png})", ""]
        settings = data["settings"].get(name)
        if settings:
            md += ["postgresql.conf for every configuration of this scenario (on top of initdb's): "
                   + ", ".join(f"`{k} = {v}`" for k, v in settings.items()), ""]
    commands = list(dict.fromkeys(re.sub(r" -p \d+ ", " -p $PORT ", c) for c in data["commands"]))
    md += ["## Commands run", "", "```"] + commands + ["```", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    return path
