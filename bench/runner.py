"""A benchmark run: where it writes, which clusters it made, what it
measured, and a progress line per step."""

import csv
import datetime
import json
import os
import shutil
import sys
import time

from bench.cluster import Cluster


class Progress:
    """One line per step: what ran, its result, elapsed and estimated time left.

    Steps differ in length (a 6 s pgbench run, a 90 s TPROC-C steady state),
    so each step says how long it was expected to take; the time left is the
    expected time of the remaining steps, scaled by how the run has gone so
    far against its expectations."""

    def __init__(self, total_steps, estimated_seconds, stream=sys.stdout):
        self.total = max(total_steps, 1)
        self.estimate = max(estimated_seconds, 1)
        self.done = 0
        self.expected_done = 0.0
        self.start = time.time()
        self.stream = stream

    def step(self, message, expected=None):
        self.done += 1
        self.expected_done += expected if expected is not None else self.estimate / self.total
        elapsed = time.time() - self.start
        pace = elapsed / self.expected_done if self.expected_done else 1.0
        left = max(self.estimate - self.expected_done, 0) * pace
        pct = 100 * self.done / self.total
        print(
            f"[{self.done:4d}/{self.total} {pct:3.0f}% {fmt(elapsed)} elapsed, ~{fmt(left)} left] {message}",
            file=self.stream,
            flush=True,
        )

    def extend(self, steps, expected_seconds):
        """Steps the plan did not count (extra rounds where a CI came out
        too wide): the total and the estimate grow by them."""
        self.total += steps
        self.estimate += expected_seconds

    def note(self, message):
        print(f"[{fmt(time.time() - self.start)}] {message}", file=self.stream, flush=True)


def fmt(seconds):
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Run:
    def __init__(self, out_dir, installs, profile, key_file, workdir, progress):
        self.out_dir = out_dir
        self.installs = installs
        self.profile = profile
        self.key_file = key_file
        self.workdir = workdir
        self.progress = progress
        self.rows = []
        self.commands = []
        self.settings = {}  # scenario -> postgresql.conf settings used
        self.clusters = []

    def cluster(self, config, settings, scenario):
        self.settings[scenario] = dict(settings)
        c = Cluster(
            self.installs[config.install],
            config,
            os.path.join(self.workdir, scenario),
            settings,
            self.key_file,
        )
        self.clusters.append(c)
        return c

    def record(self, scenario, config, rep, metric, value, **params):
        row = {"scenario": scenario, "config": config, "rep": rep, "metric": metric, "value": value}
        row.update(params)
        self.rows.append(row)

    def command(self, cmd):
        if cmd not in self.commands:
            self.commands.append(cmd)

    def cleanup(self):
        for c in self.clusters:
            try:
                c.destroy()
            except Exception:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def save_results(out_dir, meta, rows, commands, settings):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "settings": settings, "commands": commands, "results": rows}, f, indent=1)
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def load_results(out_dir):
    with open(os.path.join(out_dir, "results.json")) as f:
        return json.load(f)


def timestamp():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
