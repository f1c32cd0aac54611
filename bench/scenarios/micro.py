"""micro: the page cipher per 8 kB page (ns, GB/s) beside `openssl speed`
on the same machine — the physical limit of AES-XTS here."""
import json
import os
import re
import subprocess

from bench import plots

NAME = "micro"
TITLE = "Page encryption per 8 kB page vs openssl speed"
SEED = None

PROFILES = {"quick": dict(seconds=1.0, repetitions=3), "full": dict(seconds=2.0, repetitions=5)}


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["steps"] = p["repetitions"] * 2
    p["est_seconds"] = p["repetitions"] * (8 * p["seconds"] + 2 * max(1, int(p["seconds"])))
    return p


def openssl_speed(cipher, seconds):
    out = subprocess.run(["openssl", "speed", "-evp", cipher, "-bytes", "8192", "-seconds", str(max(1, int(seconds)))],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.upper().startswith(cipher.upper()):
            kbs = float(re.sub(r"k$", "", line.split()[-1]))   # 1000s of bytes per second
            gbs = kbs * 1000 / 1e9
            return {"ns_per_page": 8192 / gbs, "gb_per_s": gbs}
    raise RuntimeError(f"could not parse openssl speed output for {cipher}:\n{out}")


def run(run, p):
    tool = run.installs["pgcipher"].micro_bench
    for rep in range(1, p["repetitions"] + 1):
        out = subprocess.run([tool, str(p["seconds"])], capture_output=True, text=True, check=True).stdout
        run.command(f"{os.path.basename(tool)} {p['seconds']}")
        for line in out.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                for metric in ("ns_per_page", "gb_per_s"):
                    run.record(NAME, d["cipher"], rep, metric, d[metric], case=d["case"])
        run.progress.step(f"{NAME} page cipher round {rep}", 8 * p["seconds"])
        for cipher in ("aes-128-xts", "aes-256-xts"):
            d = openssl_speed(cipher, p["seconds"])
            run.command(f"openssl speed -evp {cipher} -bytes 8192")
            for metric, value in d.items():
                run.record(NAME, cipher.replace("-xts", ""), rep, metric, value, case="openssl-speed")
        run.progress.step(f"{NAME} openssl speed round {rep}", 2 * max(1, int(p["seconds"])))


def report(rows, p, out_dir):
    from bench import stats
    md = ["ns per 8 kB page (median of rounds).  `xts-*` is the cipher alone on bytes 16..8191 as the server "
          "runs it (context reused, tweak reset per page); `write-path` adds the checksum over the "
          "ciphertext, `read-path` the checksum check over the ciphertext and decryption; "
          "`openssl-speed` is `openssl speed -evp aes-*-xts -bytes 8192`.\n",
          "| cipher | case | ns/page | GB/s | vs openssl speed |", "|---|---|---|---|---|"]
    labels, values = [], []
    for cipher in ("aes-128", "aes-256"):
        ref = stats.median([r["value"] for r in rows if r["config"] == cipher and r["case"] == "openssl-speed"
                            and r["metric"] == "ns_per_page"])
        for case in ("xts-encrypt", "xts-decrypt", "write-path", "read-path", "openssl-speed"):
            ns = stats.median([r["value"] for r in rows if r["config"] == cipher and r["case"] == case and r["metric"] == "ns_per_page"])
            gb = stats.median([r["value"] for r in rows if r["config"] == cipher and r["case"] == case and r["metric"] == "gb_per_s"])
            if ns != ns:
                continue
            md.append(f"| {cipher} | {case} | {ns:,.0f} | {gb:.2f} | {ns / ref:.2f}× |")
            labels.append(f"{cipher} {case}")
            values.append(ns)
    md.append("\nTarget for the cipher alone: within 1.2× of openssl speed's time per 8 kB.")
    pngs = []
    if labels and plots.bars(labels, values, os.path.join(out_dir, f"{NAME}-ns-per-page.png"),
                             "Page cipher, ns per 8 kB page", "ns per page (lower is better)"):
        pngs.append(f"{NAME}-ns-per-page.png")
    return "\n".join(md), pngs
