"""Statistics for the report: medians, ratios and bootstrap confidence
intervals, the verdict a ratio gets against the noise floor (a second,
identical stock server), and the rule for extra rounds.  Pure Python,
seeded, so a report is reproducible from its results.json."""

import random
import statistics


def median(values):
    return statistics.median(values) if values else float("nan")


def ratio_of_medians(treatment, baseline):
    base = median(baseline)
    return median(treatment) / base if base else float("nan")


def bootstrap_ratio_ci(treatment, baseline, iterations=2000, level=0.95, seed=17):
    """Percentile bootstrap CI of median(treatment) / median(baseline),
    resampling each group with replacement.  With one value per group the
    interval collapses to the point estimate."""
    if not treatment or not baseline:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    ratios = []
    for _ in range(iterations):
        t = [rng.choice(treatment) for _ in treatment]
        b = [rng.choice(baseline) for _ in baseline]
        mb = statistics.median(b)
        if mb:
            ratios.append(statistics.median(t) / mb)
    ratios.sort()
    lo = ratios[int((1 - level) / 2 * (len(ratios) - 1))]
    hi = ratios[int((1 + level) / 2 * (len(ratios) - 1))]
    return (lo, hi)


def summarize(treatment, baseline):
    """Dict with the medians, the ratio and its CI, ready for a table."""
    lo, hi = bootstrap_ratio_ci(treatment, baseline)
    return {
        "baseline_median": median(baseline),
        "median": median(treatment),
        "ratio": ratio_of_medians(treatment, baseline),
        "ci_low": lo,
        "ci_high": hi,
        "n": len(treatment),
        "n_baseline": len(baseline),
    }


# The verdicts a ratio can get (verdict below).
INSIDE_NOISE = "inside the noise"
SLOWER = "slower"
FASTER = "faster"
TOO_FEW = "too few rounds"
NO_DATA = "no data"


def _valid(summary):
    return bool(summary) and all(
        summary.get(k) == summary.get(k) and summary.get(k) is not None
        for k in ("ratio", "ci_low", "ci_high")
    )


def noise_band(noise_floor_summary=None):
    """The ratios two identical servers can show on this machine: the
    smallest interval holding 1.0 and the noise floor's CI (stock-2 / stock);
    just 1.0 without a noise floor."""
    if not _valid(noise_floor_summary):
        return (1.0, 1.0)
    return (min(1.0, noise_floor_summary["ci_low"]), max(1.0, noise_floor_summary["ci_high"]))


def verdict(summary, noise_floor_summary=None, higher_is_better=True):
    """What a ratio (a summarize() dict, treatment / baseline) says.

    "inside the noise" when its 95% CI overlaps the noise band — it contains
    1.0, or overlaps the CI of stock-2 / stock (two identical servers), or
    lies between the two; "slower" or "faster" when the CI lies wholly
    outside the band (below it is slower for a throughput, higher_is_better,
    and faster for a time); "too few rounds" with fewer than two values on
    either side, whose bootstrap CI collapses to the point estimate."""
    if not _valid(summary):
        return NO_DATA
    if summary.get("n", 0) < 2 or summary.get("n_baseline", 0) < 2:
        return TOO_FEW
    lo, hi = noise_band(noise_floor_summary)
    if summary["ci_low"] <= hi and summary["ci_high"] >= lo:
        return INSIDE_NOISE
    below = summary["ci_high"] < lo
    return SLOWER if below == higher_is_better else FASTER


def ci_wider_than_effect(summary):
    """The rule for extra rounds: the 95% CI contains 1.0 and is wider than
    the effect (ci_high - ci_low > |ratio - 1|), so these rounds cannot even
    tell the direction of the difference."""
    if not _valid(summary):
        return False
    return summary["ci_low"] <= 1.0 <= summary["ci_high"] and summary["ci_high"] - summary["ci_low"] > abs(
        summary["ratio"] - 1.0
    )
