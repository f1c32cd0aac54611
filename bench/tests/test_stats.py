import math

import pytest

from bench import stats


@pytest.mark.parametrize("values, expected", [
    ([3.0], 3.0),
    ([1.0, 3.0], 2.0),
    ([5.0, 1.0, 3.0], 3.0),
    ([], float("nan")),
])
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
    assert (lo, hi) == stats.bootstrap_ratio_ci(t, b)      # seeded
    assert hi < 1.0                                          # clearly slower


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
