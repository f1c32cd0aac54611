"""Statistics for the report: medians, ratios and bootstrap confidence
intervals.  Pure Python, seeded, so a report is reproducible from its
results.json."""
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
