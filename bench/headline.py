"""The few lines the demo ends with (python -m bench headline RESULTS_DIR):
aes-256 against stock for pgbench, the TPROC-C-like mix, the page cipher
against openssl speed and, where the instructions scenario ran, callgrind
instruction counts against their targets.

Every ratio comes with its 95% CI and the verdict of stats.verdict, said
plainly: "inside the noise (stock vs stock: X–Y)" when its CI overlaps the
band from 1.0 to the noise floor (stock-2 / stock, a second identical stock
server), "aes-256 slower by N % (CI a–b)" when it lies below it."""

import json
import os

from bench import stats
from bench.scenarios import instructions
from bench.scenarios.common import BASELINE, NOISE, TREATMENT
from bench.scenarios.micro import LIMIT_CASES

# instructions aes-256 / stock per workload: the scenario's targets (None: none)
INSTRUCTION_TARGETS = instructions.TARGETS


def load(path):
    """The rows of RESULTS_DIR/results.json (or of that file itself)."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    with open(path) as f:
        return json.load(f)["results"]


def values(rows, **match):
    return [r["value"] for r in rows if all(r.get(k) == v for k, v in match.items())]


def phrase(summary, floor=None, higher_is_better=True, treatment=TREATMENT):
    """ "ratio R (CI a–b), inside the noise (stock vs stock: X–Y)" or
    "ratio R, aes-256 slower by N % (CI a–b)", by stats.verdict."""
    v = stats.verdict(summary, floor, higher_is_better)
    if v == stats.NO_DATA:
        return "no data"
    r, ci = summary["ratio"], f"CI {summary['ci_low']:.2f}–{summary['ci_high']:.2f}"
    if v == stats.INSIDE_NOISE:
        if floor and floor["ratio"] == floor["ratio"]:
            return (
                f"ratio {r:.3f} ({ci}), inside the noise "
                f"(stock vs stock: {floor['ci_low']:.2f}–{floor['ci_high']:.2f})"
            )
        return f"ratio {r:.3f} ({ci}), inside the noise (the CI holds 1.0; no second stock server ran)"
    if v == stats.TOO_FEW:
        return f"ratio {r:.3f}, too few rounds for a CI (one run per configuration)"
    pct = abs(r - 1) * 100
    return f"ratio {r:.3f}, {treatment} {v} by {pct:.1f} % ({ci})"


def compare(rows, higher_is_better=True, **match):
    """(baseline median, treatment median, phrase) of aes-256 / stock over
    the rows matching, judged against stock-2 / stock there."""
    base = values(rows, config=BASELINE, **match)
    treat = values(rows, config=TREATMENT, **match)
    noise = values(rows, config=NOISE, **match)
    if not base or not treat:
        return None
    floor = stats.summarize(noise, base) if noise else None
    return (
        stats.median(base),
        stats.median(treat),
        phrase(stats.summarize(treat, base), floor, higher_is_better),
    )


def pgbench_lines(rows):
    tps = [r for r in rows if r["scenario"] == "cybertec-pgbench" and r["metric"] == "tps"]
    points = list(dict.fromkeys((r["workload"], r["scale"], r["clients"]) for r in tps))
    several = len({(s, c) for _, s, c in points}) > 1
    lines = []
    for w, scale, clients in points:
        got = compare(tps, workload=w, scale=scale, clients=clients)
        if got:
            s, e, text = got
            label = f"{w} (scale {scale}, {clients} client{'s' if clients != 1 else ''})" if several else w
            lines.append(f"pgbench {label:12s} {s:10,.0f} tps stock {e:10,.0f} tps aes-256   {text}")
    return lines


def tprocc_lines(rows):
    nopm = [r for r in rows if r["scenario"] == "tproc-c" and r["metric"] == "nopm"]
    # the steady state where there is one, else the ramp's largest VU count
    steady = [r for r in nopm if r.get("phase") == "steady"]
    if steady:
        part, what = steady, f"steady state, {steady[0]['vus']} VUs"
    elif nopm:
        vus = max(r["vus"] for r in nopm)
        part, what = [r for r in nopm if r["vus"] == vus], f"{vus} VUs"
    else:
        return []
    got = compare(part)
    if not got:
        return []
    s, e, text = got
    return [f"TPROC-C-like NOPM ({what}) {s:10,.0f} stock {e:10,.0f} aes-256   {text}"]


def micro_lines(rows):
    mic = [
        r
        for r in rows
        if r["scenario"] == "micro" and r["config"] == "aes-256" and r["metric"] == "ns_per_page"
    ]
    x = values(mic, case="xts-encrypt")
    # the limit as the micro report takes it: the fastest OpenSSL measured
    limits = [v for v in (values(mic, case=c) for c in LIMIT_CASES) if v]
    if not x or not limits:
        return []
    o = min(limits, key=stats.median)
    s = stats.summarize(x, o)
    return [
        f"AES-256-XTS per 8 kB page: {s['median']:,.0f} ns (limit, the fastest OpenSSL: "
        f"{s['baseline_median']:,.0f} ns, {s['ratio']:.2f}x, CI {s['ci_low']:.2f}–{s['ci_high']:.2f})"
    ]


def instruction_lines(rows):
    all_ins = [r for r in rows if r["scenario"] == "instructions"]
    ins = [r for r in all_ins if r["metric"] in ("instructions", "instructions_native_cipher")]
    workloads = [w for w in INSTRUCTION_TARGETS if any(r.get("workload") == w for r in ins)]
    workloads += [w for w in dict.fromkeys(r.get("workload") for r in ins) if w not in workloads]
    lines = []
    for w in workloads:
        base = values(ins, config=BASELINE, workload=w, metric="instructions")
        treat = values(ins, config=TREATMENT, workload=w, metric="instructions")
        native = values(ins, config=TREATMENT, workload=w, metric="instructions_native_cipher")
        if not base or not treat:
            continue
        raw = stats.ratio_of_medians(treat, base)
        # judged as the CPU runs the cipher (VAES), where the run calibrated it
        r = stats.ratio_of_medians(native, base) if native else raw
        t = INSTRUCTION_TARGETS.get(w)
        target = f"target ≤ {t:.2f}, {'met' if r <= t else 'NOT met'}" if t else "no target"
        how = f"as the CPU runs the cipher; callgrind {raw:.3f}" if native else "callgrind"
        alone = instructions.cipher_alone(all_ins, TREATMENT, w, BASELINE) if native else float("nan")
        why = f"; the cipher alone {alone:.3f}" if alone == alone else ""
        lines.append(f"instructions aes-256/stock {w:18s} {r:.3f} ({how}; {target}{why})")
    return lines


def headline(rows):
    lines = pgbench_lines(rows) + tprocc_lines(rows) + micro_lines(rows) + instruction_lines(rows)
    if not lines:
        return ["headline: no pgbench, TPROC-C, micro or instructions results"]
    return [
        "headline (median aes-256 / stock, 95% CI; the noise floor is stock-2 / stock, two identical "
        "servers):"
    ] + lines
