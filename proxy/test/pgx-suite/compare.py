#!/usr/bin/env python3
"""compare.py — per-test results of pgx's suite, direct against each variant.

Reads the `go test -json` output that run.sh writes for each variant
(DIR/VARIANT.json) and the PGX_* variables that variant set (DIR/VARIANT.env,
NAME=VALUE lines).

  compare.py counts FILE.json
      one line: passed, failed (of which unfinished), skipped
  compare.py compare [--known known.txt] DIR direct VARIANT...
      counts per variant, then every test whose result differs from
      direct's; exit status 1 if any does (known.txt aside)

A test with a "run" event and no pass/fail/skip (its package panicked or hit
go test's -timeout) is failed ("unfinished"); a test that direct ran and a
variant never started (its package ended first) is "absent" there.  A test
that a variant skipped for an unset variable ("Skipping due to missing
environment variable X") that direct had set is not compared: run.sh sets
the TLS and Unix-socket strings only where they can reach the server.

known.txt: one test per line, "[VARIANT:]NAME REASON", # starts a comment;
NAME may hold * wildcards; without VARIANT: the line covers every variant.
"""

import argparse
import fnmatch
import json
import re
import sys
from pathlib import Path

MODULE = "github.com/jackc/pgx/v5"
PACKAGE = "(package)"  # a package's own result, for failures outside any test
MISSING_ENV = re.compile(r"missing environment variable (\w+)")
TIMED_OUT = re.compile(r"panic: test timed out after (\S+)")
RUNNING = re.compile(r"^\s+(Test\S*) \([0-9hms.]+\)$")
LOCATION = re.compile(r"^\s*\S+_test\.go:\d+: ?(.*)$")
# t.TempDir() in a subtest's name: /tmp/TestName<random>/001
TEMPDIR = re.compile(r"(Test\w*?)\d+/(\d{3})(?=\D|$)")


def short(pkg):
    """pgx's import path without the module: "pgx" for the root package."""
    if pkg == MODULE:
        return "pgx"
    return pkg.removeprefix(MODULE + "/")


class Run:
    """One variant's results: test name -> pass, fail or skip."""

    def __init__(self, path):
        self.result = {}  # "pkg.Test/Sub" -> pass | fail | skip
        self.unfinished = set()
        self.skip_env = {}  # name -> the variable whose absence skipped it
        self.output = {}  # name -> output lines
        self.timeouts = []  # (package, after, [tests running then])
        self.packages = {}  # package -> pass | fail
        self._read(path)

    def _read(self, path):
        started = set()
        pkg_out = {}
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                pkg = ev.get("Package") or ev.get("ImportPath", "")
                action = ev.get("Action")
                test = ev.get("Test")
                if pkg == "" or action is None:
                    continue
                pkg = short(pkg.split(" ")[0])
                if test is None:
                    if action in ("pass", "fail", "skip"):
                        self.packages[pkg] = action
                    elif action in ("output", "build-output"):
                        pkg_out.setdefault(pkg, []).append(ev.get("Output", ""))
                    continue
                name = pkg + "." + TEMPDIR.sub(r"\1*/\2", test)
                if action == "run":
                    started.add(name)
                elif action == "output":
                    self.output.setdefault(name, []).append(ev.get("Output", ""))
                elif action in ("pass", "fail", "skip"):
                    self.result[name] = action
                    if action == "skip":
                        m = MISSING_ENV.search("".join(self.output.get(name, [])))
                        if m:
                            self.skip_env[name] = m.group(1)
        for name in started - self.result.keys():
            self.result[name] = "fail"
            self.unfinished.add(name)
        for pkg, lines in pkg_out.items():
            self._timeouts(pkg, lines)
        for name, lines in self.output.items():
            self._timeouts(name.split(".", 1)[0], lines)
        for pkg, res in self.packages.items():
            # a package failing outside its tests (build, TestMain, a panic
            # between tests) is a result of its own
            if res == "fail" and not any(
                r == "fail" for n, r in self.result.items() if n.split(".", 1)[0] == pkg
            ):
                self.result[f"{pkg}.{PACKAGE}"] = "fail"

    def _timeouts(self, pkg, lines):
        text = "".join(lines).splitlines()
        for i, line in enumerate(text):
            m = TIMED_OUT.search(line)
            if not m:
                continue
            running = []
            for nxt in text[i + 1 :]:
                r = RUNNING.match(nxt)
                if r:
                    running.append(r.group(1))
                elif running or nxt.strip() not in ("", "running tests:"):
                    break
            if (pkg, m.group(1), running) not in self.timeouts:
                self.timeouts.append((pkg, m.group(1), running))

    def counts(self):
        tests = {n: r for n, r in self.result.items() if not n.endswith(PACKAGE)}
        n = {a: sum(1 for r in tests.values() if r == a) for a in ("pass", "fail", "skip")}
        return n, len(self.unfinished)

    def why(self, name):
        """The first message of a failed test: testify's Error: or t.Error's."""
        lines = [ln.rstrip("\n") for ln in self.output.get(name, [])]
        for i, ln in enumerate(lines):
            s = ln.strip()
            if s.startswith("Error:"):
                msg = s.removeprefix("Error:").strip()
                if i + 1 < len(lines) and (not msg or msg.endswith(":")):
                    msg = f"{msg} {lines[i + 1].strip()}"
                return msg[:200]
        for ln in lines:
            m = LOCATION.match(ln)
            if m and m.group(1).strip() and "Error Trace" not in ln:
                return m.group(1).strip()[:200]
        for ln in lines:
            if "panic:" in ln:
                return ln.strip()[:200]
        return ""


def counts_line(run):
    n, unfinished = run.counts()
    extra = f" ({unfinished} unfinished)" if unfinished else ""
    pkgs = sorted(p for p, r in run.packages.items() if r == "fail")
    tail = f"; packages failed: {' '.join(pkgs)}" if pkgs else ""
    return f"{n['pass']} passed, {n['fail']} failed{extra}, {n['skip']} skipped{tail}"


def read_env(path):
    names = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line:
                names.add(line.split("=", 1)[0])
    return names


def read_known(path, variants):
    """[(variant or None, pattern, reason)]"""
    known = []
    if path is None or not path.exists():
        return known
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        name, reason = parts[0], parts[1] if len(parts) > 1 else ""
        variant = None
        head, sep, rest = name.partition(":")
        if sep and head in variants:
            variant, name = head, rest
        if not reason:
            print(f"{path}:{n}: no reason given for {name}", file=sys.stderr)
        known.append((variant, name, reason))
    return known


def is_known(known, variant, name):
    for v, pattern, reason in known:
        if v in (None, variant) and fnmatch.fnmatchcase(name, pattern):
            return reason or "(no reason)"
    return None


def compare(args):
    d = Path(args.dir)
    variants = args.variants
    if variants[0] != "direct":
        sys.exit("compare.py: the first variant must be direct (the reference)")
    runs = {v: Run(d / f"{v}.json") for v in variants}
    envs = {v: read_env(d / f"{v}.env") for v in variants}
    known = read_known(Path(args.known) if args.known else None, variants)
    ref = runs["direct"]

    width = max(len(v) for v in variants)
    print("pgx-suite results (tests and subtests):")
    for v in variants:
        print(f"  {v:<{width}}  {counts_line(runs[v])}")
    for v in variants:
        for pkg, after, running in runs[v].timeouts:
            what = ", ".join(running) if running else "(none named)"
            print(f"  {v}: package {pkg} timed out after {after}; running then: {what}")

    differ = False
    for v in variants[1:]:
        run = runs[v]
        diffs, not_compared, explained = [], [], []
        for name in sorted(ref.result.keys() | run.result.keys()):
            a = ref.result.get(name, "absent")
            b = run.result.get(name, "absent")
            if name in run.unfinished:
                b = "fail (unfinished)"
            if name in ref.unfinished:
                a = "fail (unfinished)"
            if a == b:
                continue
            var = run.skip_env.get(name)
            if b == "skip" and var and var not in envs[v] and var in envs["direct"]:
                not_compared.append(name)
                continue
            reason = is_known(known, v, name)
            if reason:
                explained.append((name, a, b, reason))
                continue
            diffs.append((name, a, b))
        summary = (
            f"{v} against direct: {len(diffs)} differ, {len(explained)} known (known.txt), "
            f"{len(not_compared)} not compared (variable unset in {v})"
        )
        print(f"\n{summary}")
        # the differences last: a log's tail (CI prints one) shows them
        for name, a, b, reason in explained:
            print(f"  known: {name}  direct={a}  {v}={b}  -- {reason}")
        for name, a, b in diffs:
            why = run.why(name) if b.startswith("fail") else ""
            print(f"  DIFFERS: {name}  direct={a}  {v}={b}" + (f"  -- {why}" if why else ""))
        if diffs:
            print(f"  ({summary})")
        differ = differ or bool(diffs)
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("counts", help="one variant's counts")
    c.add_argument("json")
    p = sub.add_parser("compare", help="every variant against direct")
    p.add_argument("--known", help="known.txt: differences explained")
    p.add_argument("dir")
    p.add_argument("variants", nargs="+")
    args = ap.parse_args()
    if args.cmd == "counts":
        print(counts_line(Run(args.json)))
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
