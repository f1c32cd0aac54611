#!/usr/bin/env python3
"""compare.py — a driver's test results directly and through the proxy.

  compare.py DRIVER DIRECT_DIR PROXY_DIR KNOWN [--differing FILE]

asyncpg: DIR/results.xml, pytest's JUnit XML: each test passed, failed
(failure or error) or skipped.  node-postgres: DIR/FILE.log and DIR/FILE.rc,
one per test/integration file run by node (its own little runner prints
"name ✔" per test, "name FAILED!" for a failure; the file's exit status
says whether all of it passed; 124 is our timeout): the file is the unit
compared, with its counts of passed and failed tests.

Prints the counts of both runs, then every test whose result differs;
exit status 1 if any does, known.txt aside, and a test that fails directly
but passes through the proxy aside (printed: the test's own flakiness).  With --differing FILE, the
names of those tests go to FILE; run.sh runs them again on both sides
(DIR/rerun.xml for asyncpg, the files' .log and .rc replaced for
node-postgres) and compares once more: a difference must reproduce.  known.txt: "DRIVER NAME
REASON" a line, # starts a comment, NAME may hold * wildcards.
"""

import fnmatch
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def asyncpg_results(d):
    res, why = {}, {}
    cases = list(ET.parse(d / "results.xml").getroot().iter("testcase"))
    if (d / "rerun.xml").exists():
        # a rerun of the tests that differed: its results stand
        cases += list(ET.parse(d / "rerun.xml").getroot().iter("testcase"))
    for case in cases:
        name = f"{case.get('classname')}.{case.get('name')}"
        kind = "pass"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "fail"
                why[name] = (child.get("message") or "").splitlines()[0:1]
            elif child.tag == "skipped" and kind == "pass":
                kind = "skip"
        res[name] = kind
    return res, why


def nodepg_results(d):
    res, why = {}, {}
    for rc in sorted(d.glob("*.rc")):
        name = rc.name.removesuffix(".rc")
        log = (d / (name + ".log")).read_text(errors="replace")
        code = int(rc.read_text().strip() or 1)
        passed, failed = log.count("✔"), log.count("FAILED!")
        kind = "pass" if code == 0 else ("timeout" if code == 124 else "fail")
        res[name] = f"{kind} ({passed} passed, {failed} failed)"
        if code != 0:
            lines = [ln.strip() for ln in log.splitlines() if "FAILED!" in ln or "Error" in ln]
            why[name] = lines[:2] or log.strip().splitlines()[-1:]
    return res, why


def known(path, driver):
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            d, name, *reason = line.split(None, 2)
            if d == driver:
                out.append((name, reason[0] if reason else ""))
    return out


def main():
    driver, direct_dir, proxy_dir, known_path = sys.argv[1:5]
    # --differing FILE: write the names that differ (known ones aside)
    # there, one a line, for run.sh to run again
    differing = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--differing" else None
    read = asyncpg_results if driver == "asyncpg" else nodepg_results
    direct, dwhy = read(Path(direct_dir))
    proxy, pwhy = read(Path(proxy_dir))
    if not direct:
        print(f"{driver}: no results from the direct run")
        return 1
    for label, res in (("direct", direct), ("proxy", proxy)):
        kinds = {}
        for v in res.values():
            k = v.split(" ")[0]
            kinds[k] = kinds.get(k, 0) + 1
        print(
            f"{driver} {label}: {len(res)} "
            + ("tests" if driver == "asyncpg" else "files")
            + ": "
            + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        )
    allowed = known(known_path, driver)
    bad = 0
    names = []
    for name in sorted(set(direct) | set(proxy)):
        a, b = direct.get(name, "absent"), proxy.get(name, "absent")
        if a == b:
            continue
        reason = next((r for pat, r in allowed if fnmatch.fnmatchcase(name, pat)), None)
        if reason is None and b.startswith("pass") and a.startswith(("fail", "timeout")):
            # a test the proxy passes fails directly: the test's own
            # flakiness on a busy machine (asyncpg's pool-persistence test
            # under load), never the proxy's doing; reported, not counted
            reason = "fails directly only: the test's own flakiness, not the proxy's"
        tag = f"known: {reason}" if reason is not None else "DIFFERS"
        bad += reason is None
        if reason is None:
            names.append(name)
        print(f"  {tag}: {name}: direct {a}, proxy {b}")
        for line in pwhy.get(name, []) if b.startswith(("fail", "timeout")) else dwhy.get(name, []):
            print(f"      {line[:300]}")
    if differing:
        Path(differing).write_text("".join(n + "\n" for n in names))
    print(f"{driver}: " + ("the same results directly and through the proxy" if not bad else f"{bad} differ"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
