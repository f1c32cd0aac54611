"""The demo's closing lines (bench/headline.py) and the noise-floor pieces of
the report (common.ratio_table's verdict column, noise_floor_paragraph), on
synthetic rows."""

import pytest

from bench import headline, stats
from bench.scenarios import common


def _rows(scenario, metric, per_config, **params):
    return [
        dict(scenario=scenario, config=c, rep=i + 1, metric=metric, value=v, **params)
        for c, vs in per_config.items()
        for i, v in enumerate(vs)
    ]


STOCK = [100.0, 102.0, 98.0, 101.0]
STOCK2 = [99.0, 101.0, 100.0, 103.0]


def _s(ratio, lo, hi, n=4):
    return {"ratio": ratio, "ci_low": lo, "ci_high": hi, "n": n, "n_baseline": n}


@pytest.mark.parametrize(
    "summary, floor, expected",
    [
        (
            _s(0.985, 0.95, 1.02),
            _s(1.0, 0.93, 1.04),
            "ratio 0.985 (CI 0.95–1.02), inside the noise (stock vs stock: 0.93–1.04)",
        ),
        (_s(0.893, 0.81, 0.92), _s(1.0, 0.93, 1.04), "ratio 0.893, aes-256 slower by 10.7 % (CI 0.81–0.92)"),
        # overlaps the noise floor, though it excludes 1.0
        (
            _s(0.893, 0.81, 0.95),
            _s(1.0, 0.93, 1.04),
            "ratio 0.893 (CI 0.81–0.95), inside the noise (stock vs stock: 0.93–1.04)",
        ),
        (_s(1.10, 1.06, 1.14), _s(1.0, 0.97, 1.03), "ratio 1.100, aes-256 faster by 10.0 % (CI 1.06–1.14)"),
        (
            _s(0.99, 0.97, 1.01),
            None,
            "ratio 0.990 (CI 0.97–1.01), inside the noise (the CI holds 1.0; no second stock server ran)",
        ),
        (_s(0.90, 0.90, 0.90, n=1), None, "ratio 0.900, too few rounds for a CI (one run per configuration)"),
    ],
)
def test_phrase(summary, floor, expected):
    assert headline.phrase(summary, floor) == expected


def test_headline_lines():
    rows = (
        _rows(
            "cybertec-pgbench",
            "tps",
            {"stock": STOCK, "stock-2": STOCK2, "aes-256": [90.0, 91.0, 89.0, 90.5]},
            workload="select-only",
            scale=20,
            clients=2,
        )
        + _rows(
            "cybertec-pgbench",
            "tps",
            {"stock": STOCK, "stock-2": STOCK2, "aes-256": [99.5, 101.5, 100.0, 98.5]},
            workload="tpcb-like",
            scale=20,
            clients=2,
        )
        + _rows(
            "tproc-c",
            "nopm",
            {"stock": STOCK, "stock-2": STOCK2, "aes-256": [97.0, 99.0]},
            phase="ramp",
            vus=2,
        )
        + _rows("micro", "ns_per_page", {"aes-256": [1000.0, 1010.0]}, case="xts-encrypt")
        + _rows("micro", "ns_per_page", {"aes-256": [900.0, 910.0]}, case="openssl-speed")
        + _rows("instructions", "instructions", {"stock": [1000], "aes-256": [1020]}, workload="select-only")
        + _rows(
            "instructions", "instructions", {"stock": [1000], "aes-256": [1200]}, workload="seq-scan-os-cache"
        )
        + _rows(
            "instructions", "instructions", {"stock": [1000], "aes-256": [1300]}, workload="wal-heavy-insert"
        )
        + _rows(
            "instructions", "instructions_native_cipher", {"aes-256": [1100]}, workload="seq-scan-os-cache"
        )
        + _rows(
            "instructions",
            "instructions_libcrypto",
            {"stock": [0], "aes-256": [160]},
            workload="seq-scan-os-cache",
        )
    )
    text = "\n".join(headline.headline(rows))
    assert "pgbench select-only" in text and "aes-256 slower by" in text
    tpcb = next(line for line in text.splitlines() if "tpcb-like" in line)
    assert "inside the noise (stock vs stock:" in tpcb
    assert "TPROC-C-like NOPM (2 VUs)" in text
    assert "AES-256-XTS per 8 kB page: 1,005 ns (limit, the fastest OpenSSL: 905 ns, 1.11x, CI" in text
    lines = text.splitlines()
    # in INSTRUCTION_TARGETS order, with their targets
    ins = [line for line in lines if line.startswith("instructions")]
    assert [line.split()[2] for line in ins] == ["seq-scan-os-cache", "select-only", "wal-heavy-insert"]
    # judged as the CPU runs the cipher where the run calibrated it, else on callgrind's count
    # and with the cipher alone: 1 + (160 libcrypto - 100 fewer on the CPU) / 1000
    assert ins[0].endswith(
        "1.100 (as the CPU runs the cipher; callgrind 1.200; target ≤ 1.15, met; the cipher alone 1.060)"
    )
    assert ins[1].endswith("1.020 (callgrind; target ≤ 1.03, met)")

    assert ins[2].endswith("1.300 (callgrind; no target)")


def test_headline_without_results():
    assert headline.headline([]) == ["headline: no pgbench, TPROC-C, micro or instructions results"]


def test_ratio_table_verdict_column_uses_the_noise_floor():
    rows = _rows(
        "x", "tps", {"stock": STOCK, "stock-2": STOCK2, "aes-256": [90.0, 91.0, 89.0, 90.5]}, clients=2
    )
    table, summaries = common.ratio_table(
        rows, "stock", ["stock", "stock-2", "aes-256"], ["clients"], verdicts=True
    )
    head, _, line = table.splitlines()
    assert head.endswith("| verdict |") and line.endswith("| slower |")
    assert summaries[((2,), "aes-256")]["verdict"] == stats.SLOWER
    assert "verdict" not in summaries[((2,), "stock-2")]
    # without verdicts the table is as before
    assert "verdict" not in common.ratio_table(rows, "stock", ["stock", "aes-256"], ["clients"])[0]


def test_noise_floor_paragraph():
    rows = _rows("x", "tps", {"stock": STOCK, "stock-2": STOCK2}, workload="select-only", clients=2) + _rows(
        "x", "tps", {"stock": STOCK, "stock-2": STOCK2}, workload="tpcb-like", clients=2
    )
    text = common.noise_floor_paragraph(rows, "tps")
    assert text.startswith("**Noise floor.**")
    assert "select-only 1.0" in text and "tpcb-like 1.0" in text and "clients" not in text
    assert common.noise_floor_paragraph(_rows("x", "tps", {"stock": STOCK}), "tps") is None


def test_micro_line_takes_the_faster_limit():
    # as the micro report does: the machine's OpenSSL when it is the faster one
    rows = (
        _rows("micro", "ns_per_page", {"aes-256": [1000.0, 1010.0]}, case="xts-encrypt")
        + _rows("micro", "ns_per_page", {"aes-256": [1200.0, 1210.0]}, case="openssl-speed")
        + _rows("micro", "ns_per_page", {"aes-256": [800.0, 810.0]}, case="openssl-speed-system")
    )
    assert headline.micro_lines(rows)[0].startswith(
        "AES-256-XTS per 8 kB page: 1,005 ns (limit, the fastest OpenSSL: 805 ns, 1.25x"
    )
