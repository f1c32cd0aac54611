"""The profiles: the demo profile (./pgcipher demo, step 5) is the few
scenarios of the demo's headline, planned at a few minutes, and every
scenario has quick and full."""

from bench import cli
from bench.scenarios import SCENARIOS


def test_every_scenario_has_quick_and_full():
    for name, mod in SCENARIOS.items():
        assert {"quick", "full"} <= set(mod.PROFILES), name


def test_demo_profile_is_the_headline_in_minutes():
    demo = [n for n, m in SCENARIOS.items() if "demo" in m.PROFILES]
    assert demo == ["cybertec-pgbench", "micro", "instructions"]
    est = sum(SCENARIOS[n].plan("demo")["est_seconds"] for n in demo)
    assert est < 6 * 60, est
    # the headline's parts: pgbench beside the noise floor, and both servers
    assert {"stock", "stock-2", "aes-256"} <= set(SCENARIOS["cybertec-pgbench"].plan("demo")["configs"])


def test_demo_profile_refused_for_a_scenario_without_it(capsys):
    try:
        cli.main(["run", "--profile", "demo", "--scenario", "tproc-c", "--out", "/nonexistent"])
    except SystemExit as e:
        assert e.code == 2
    assert "no demo profile in scenario(s) tproc-c" in capsys.readouterr().err
