"""micro: the limits (the fastest OpenSSL measured) and the 1.2x verdicts,
on synthetic rows; the wheel's OpenSSL timed for real on a tiny budget."""

import pytest

from bench.scenarios import micro


def _rows(cipher, values):
    return [
        {"scenario": "micro", "config": cipher, "rep": 1, "metric": "ns_per_page", "value": v, "case": case}
        for case, v in values.items()
    ] + [
        {
            "scenario": "micro",
            "config": cipher,
            "rep": 1,
            "metric": "gb_per_s",
            "value": 8192 / v,
            "case": case,
        }
        for case, v in values.items()
    ]


@pytest.mark.parametrize(
    "values, verdicts",
    [
        # the wheel is the fastest XTS: the limit is its 500 ns
        (
            {
                "xts-encrypt": 590,
                "xts-decrypt": 610,
                "ctr-wal": 1100,
                "xts-temp": 700,
                "openssl-speed": 550,
                "openssl-speed-system": 900,
                "openssl-wheel": 500,
                "openssl-speed-ctr": 1000,
                "openssl-wheel-ctr": 1300,
            },
            [
                "xts-encrypt: 1.18× the limit — met",
                "xts-decrypt: 1.22× the limit — not met",
                "ctr-wal: 1.10× the limit — met",
                "xts-temp: 1.40× the limit — not met",
            ],
        ),
        # no wheel: the faster of the two openssl speeds
        (
            {
                "xts-encrypt": 600,
                "xts-decrypt": 600,
                "ctr-wal": 1000,
                "xts-temp": 650,
                "openssl-speed": 550,
                "openssl-speed-system": 900,
                "openssl-speed-ctr": 1000,
            },
            [
                "xts-encrypt: 1.09× the limit — met",
                "xts-decrypt: 1.09× the limit — met",
                "ctr-wal: 1.00× the limit — met",
                "xts-temp: 1.18× the limit — met",
            ],
        ),
    ],
)
def test_targets_against_the_fastest_limit(tmp_path, values, verdicts):
    md, _ = micro.report(_rows("aes-256", values), micro.plan("quick"), str(tmp_path))
    for v in verdicts:
        assert f"- aes-256 {v}" in md
    assert "write-path" not in md.split("Target")[1]  # checksums are not the cipher alone


def test_wheel_speed_measures_both_modes():
    pytest.importorskip("cryptography")
    for cipher in ("aes-128-xts", "aes-256-ctr"):
        d, version = micro.wheel_speed(cipher, 0.03)
        assert d["ns_per_page"] > 0 and d["gb_per_s"] == pytest.approx(8192 / d["ns_per_page"])
        assert version.startswith("OpenSSL ")
