import math

import pytest

from bench import stats


@pytest.mark.parametrize(
    "values, expected",
    [
        ([3.0], 3.0),
        ([1.0, 3.0], 2.0),
        ([5.0, 1.0, 3.0], 3.0),
        ([], float("nan")),
    ],
)
def test_median(values, expected):
    got = stats.median(values)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_ratio_of_medians():
    assert stats.ratio_of_medians([90, 95, 100], [100, 100, 110]) == pytest.approx(0.95)


def test_bootstrap_ci_contains_estimate_and_is_reproducible():
    t = [95.0, 97.0, 96.0, 99.0, 94.0]
    b = [100.0, 101.0, 99.0, 102.0, 100.0]
    lo, hi = stats.bootstrap_ratio_ci(t, b)
    assert lo <= stats.ratio_of_medians(t, b) <= hi
    assert (lo, hi) == stats.bootstrap_ratio_ci(t, b)  # seeded
    assert hi < 1.0  # clearly slower


def test_bootstrap_ci_single_values_collapse():
    assert stats.bootstrap_ratio_ci([90.0], [100.0]) == (pytest.approx(0.9), pytest.approx(0.9))


def test_bootstrap_ci_noisier_data_is_wider():
    quiet = stats.bootstrap_ratio_ci([99, 100, 101, 100], [100, 100, 101, 99])
    noisy = stats.bootstrap_ratio_ci([80, 120, 90, 110], [100, 70, 130, 100])
    assert (noisy[1] - noisy[0]) > (quiet[1] - quiet[0])


def test_summarize_fields():
    s = stats.summarize([9.0, 11.0], [10.0, 10.0])
    assert s["ratio"] == pytest.approx(1.0)
    assert s["n"] == 2 and s["n_baseline"] == 2
    assert s["ci_low"] <= 1.0 <= s["ci_high"]


def _s(ratio, lo, hi, n=4, n_baseline=4):
    return {"ratio": ratio, "ci_low": lo, "ci_high": hi, "n": n, "n_baseline": n_baseline}


NAN = float("nan")


@pytest.mark.parametrize(
    "summary, noise, higher_is_better, expected",
    [
        # no noise floor: only 1.0 counts
        (_s(0.90, 0.85, 0.95), None, True, "slower"),
        (_s(1.10, 1.05, 1.15), None, True, "faster"),
        (_s(0.97, 0.93, 1.01), None, True, "inside the noise"),
        (_s(1.00, 1.00, 1.00), None, True, "inside the noise"),
        # a time (lower is better): a ratio above 1 is slower
        (_s(1.10, 1.05, 1.15), None, False, "slower"),
        (_s(0.90, 0.85, 0.95), None, False, "faster"),
        # excludes 1.0 but overlaps stock-2 / stock
        (_s(0.95, 0.93, 0.97), _s(0.98, 0.94, 1.03), True, "inside the noise"),
        # excludes 1.0 and the noise floor
        (_s(0.90, 0.87, 0.92), _s(0.98, 0.94, 1.03), True, "slower"),
        (_s(1.10, 1.06, 1.12), _s(0.98, 0.94, 1.03), True, "faster"),
        # between 1.0 and a noise floor wholly on one side: still noise
        (_s(1.02, 1.01, 1.03), _s(1.07, 1.05, 1.10), True, "inside the noise"),
        (_s(1.15, 1.12, 1.18), _s(1.07, 1.05, 1.10), True, "faster"),
        (_s(0.97, 0.96, 0.98), _s(1.07, 1.05, 1.10), True, "slower"),
        # a noise floor without data counts as none
        (_s(0.90, 0.85, 0.95), _s(NAN, NAN, NAN), True, "slower"),
        # one value per side: the CI is a point, no verdict
        (_s(0.90, 0.90, 0.90, n=1, n_baseline=1), None, True, "too few rounds"),
        (_s(0.90, 0.85, 0.95, n=3, n_baseline=1), None, True, "too few rounds"),
        (_s(NAN, NAN, NAN), None, True, "no data"),
        (None, None, True, "no data"),
    ],
)
def test_verdict(summary, noise, higher_is_better, expected):
    assert stats.verdict(summary, noise, higher_is_better) == expected


@pytest.mark.parametrize(
    "noise, band",
    [
        (None, (1.0, 1.0)),
        (_s(0.98, 0.94, 1.03), (0.94, 1.03)),
        (_s(1.07, 1.05, 1.10), (1.0, 1.10)),
        (_s(0.90, 0.88, 0.93), (0.88, 1.0)),
    ],
)
def test_noise_band(noise, band):
    assert stats.noise_band(noise) == band


@pytest.mark.parametrize(
    "summary, expected",
    [
        (_s(0.99, 0.90, 1.08), True),  # can't tell the direction
        (_s(1.01, 0.99, 1.03), True),
        (_s(0.90, 0.85, 0.95), False),  # excludes 1.0: decided
        (_s(1.10, 1.02, 1.30), False),
        # a percentile CI beside its point estimate: holds 1.0 but is narrower than the effect
        (_s(0.95, 0.96, 1.00), False),
        (_s(0.90, 0.99, 1.01), False),
        (_s(1.00, 1.00, 1.00), False),  # a point: nothing more to learn
        (_s(NAN, NAN, NAN), False),
    ],
)
def test_ci_wider_than_effect(summary, expected):
    assert stats.ci_wider_than_effect(summary) == expected


def test_verdict_on_real_summaries():
    slow = stats.summarize([90.0, 91.0, 89.0, 90.5], [100.0, 101.0, 99.0, 100.5])
    same = stats.summarize([100.0, 101.0, 99.0, 100.5], [100.0, 101.0, 99.0, 100.5])
    assert stats.verdict(slow, same) == "slower"
    assert stats.verdict(same, same) == "inside the noise"
    assert not stats.ci_wider_than_effect(slow)
