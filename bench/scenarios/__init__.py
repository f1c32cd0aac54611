"""One module per scenario.  Each has NAME, TITLE, SEED (the vendor report
it reproduces: a key of bench/vendor_reports.py, or None), and three functions:

    plan(profile, overrides=None) -> dict of parameters, with "steps" and "est_seconds" estimates
    run(run, params)                  measures and calls run.record(...)
    report(rows, params, out_dir)     -> (markdown, [png file names])

A module may also set INSTALLS, the builds it needs (default both
"pgcipher" and "stock"): without "stock", it runs without the stock build.

Adding a scenario is adding a module and listing it here."""

from bench.scenarios import (
    aio,
    alibaba_sysbench,
    citus,
    columns_micro,
    cybertec_1mb,
    cybertec_pgbench,
    instructions,
    micro,
    online_encryption,
    online_rotation,
    pg_upgrade,
    pooler,
    proxy,
    proxy_orm,
    tde_worst_cases,
    tprocc,
    wal_heavy,
)

SCENARIOS = {
    m.NAME: m
    for m in (
        cybertec_pgbench,
        cybertec_1mb,
        tprocc,
        wal_heavy,
        pg_upgrade,
        online_rotation,
        online_encryption,
        micro,
        columns_micro,
        proxy,
        pooler,
        proxy_orm,
        alibaba_sysbench,
        instructions,
        aio,
        citus,
        tde_worst_cases,
    )
}
