"""micro: the page cipher per 8 kB page (ns, GB/s) beside `openssl speed`
on the same machine — the physical limit of AES-XTS here — and the WAL's
AES-CTR and the temporary files' XTS per 8 kB block.

Three limits: `openssl speed` of the OpenSSL the server links (server/
openssl.sh builds it, with a VAES/AVX-512 AES-XTS), of the machine's own
`openssl` (Debian 12's 3.0, which pgcipher linked before), and the newest
OpenSSL within reach, the one inside PyPI's `cryptography` wheel (pinned in
requirements.txt), timed from Python on 1 MiB per call so that Python's
per-call cost vanishes; the target is measured against the fastest."""

import json
import os
import re
import subprocess
import time

from bench import plots

NAME = "micro"
TITLE = "Page encryption per 8 kB page vs openssl speed"
SEED = None

PROFILES = {
    "demo": dict(seconds=0.5, repetitions=3),
    "quick": dict(seconds=1.0, repetitions=3),
    "full": dict(seconds=2.0, repetitions=5),
}


def plan(profile, overrides=None):
    p = dict(PROFILES[profile])
    p.update(overrides or {})
    p["steps"] = p["repetitions"] * 2
    p["est_seconds"] = p["repetitions"] * (16 * p["seconds"] + 8 * max(1, int(p["seconds"])))
    return p


SYSTEM_OPENSSL = "/usr/bin/openssl"


def linked_openssl_tool(install):
    """The `openssl` program of the library the install's postgres loads
    (lib/../bin/openssl), or None when it links the machine's."""
    from bench.sysinfo import linked_openssl

    path, _ = linked_openssl(install.prefix)
    tool = os.path.join(os.path.dirname(os.path.dirname(path)), "bin", "openssl") if path else ""
    return tool if tool and os.access(tool, os.X_OK) and not tool.startswith("/usr/") else None


def openssl_speed(cipher, seconds, tool="openssl"):
    out = subprocess.run(
        [tool, "speed", "-evp", cipher, "-bytes", "8192", "-seconds", str(max(1, int(seconds)))],
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        if line.upper().startswith(cipher.upper()):
            kbs = float(re.sub(r"k$", "", line.split()[-1]))  # 1000s of bytes per second
            gbs = kbs * 1000 / 1e9
            return {"ns_per_page": 8192 / gbs, "gb_per_s": gbs}
    raise RuntimeError(f"could not parse openssl speed output for {cipher}:\n{out}")


WHEEL_BUFFER = 1 << 20
# what every limit is measured for
LIMIT_CIPHERS = ("aes-128-xts", "aes-256-xts", "aes-128-ctr", "aes-256-ctr")


def wheel_speed(cipher, seconds):
    """Throughput of the cryptography wheel's OpenSSL for cipher (aes-NNN-xts
    or aes-NNN-ctr) on 1 MiB per call, best of 3 tries of seconds / 3, as
    {"ns_per_page": ns per 8 kB, "gb_per_s": ...} and its version; None when
    the package is missing."""
    try:
        from cryptography.hazmat.backends.openssl import backend
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        return None, None
    bits, mode = int(cipher[4:7]), cipher[8:]
    key = bytes(range(bits // 8 * (2 if mode == "xts" else 1)))
    iv = bytes(16)
    buf = bytes(WHEEL_BUFFER)
    out = bytearray(WHEEL_BUFFER + 15)  # into one buffer, as openssl speed does
    best = float("inf")
    for _ in range(3):
        enc = Cipher(algorithms.AES(key), modes.XTS(iv) if mode == "xts" else modes.CTR(iv)).encryptor()
        n, t0 = 0, time.perf_counter()
        while True:
            enc.update_into(buf, out)
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds / 3:
                break
        best = min(best, elapsed / n)
    gbs = WHEEL_BUFFER / best / 1e9
    return {"ns_per_page": 8192 / gbs, "gb_per_s": gbs}, backend.openssl_version_text()


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
        # the limits: the linked OpenSSL's speed and the machine's
        linked = linked_openssl_tool(run.installs["pgcipher"])
        tools = {"openssl-speed": linked or SYSTEM_OPENSSL}
        if linked and os.path.realpath(linked) != os.path.realpath(SYSTEM_OPENSSL):
            tools["openssl-speed-system"] = SYSTEM_OPENSSL
        for case, speed_tool in tools.items():
            for cipher in LIMIT_CIPHERS:
                d = openssl_speed(cipher, p["seconds"], speed_tool)
                run.command(f"{speed_tool} speed -evp {cipher} -bytes 8192")
                for metric, value in d.items():
                    run.record(
                        NAME,
                        cipher[:7],
                        rep,
                        metric,
                        value,
                        case=case + ("-ctr" if cipher.endswith("ctr") else ""),
                    )
        for cipher in LIMIT_CIPHERS:
            d, version = wheel_speed(cipher, p["seconds"])
            if d is None:
                break
            run.command(f"python: cryptography {cipher} on {WHEEL_BUFFER} bytes per call ({version})")
            for metric, value in d.items():
                run.record(
                    NAME,
                    cipher[:7],
                    rep,
                    metric,
                    value,
                    detail=version,
                    case="openssl-wheel" + ("-ctr" if cipher.endswith("ctr") else ""),
                )
        run.progress.step(f"{NAME} openssl speed round {rep}", 12 * max(1, int(p["seconds"])))


def _median(rows, cipher, case, metric):
    from bench import stats

    return stats.median(
        [r["value"] for r in rows if r["config"] == cipher and r["case"] == case and r["metric"] == metric]
    )


# what the limits are taken from (each also with -ctr)
LIMIT_CASES = ("openssl-speed", "openssl-speed-system", "openssl-wheel")


def _wheel_version(rows):
    v = next(
        (r.get("detail") for r in rows if r.get("case", "").startswith("openssl-wheel") and r.get("detail")),
        None,
    )
    return f" ({v})" if v else ""


# the cases held to the 1.2x target (the paths with a checksum are not the cipher alone)
TARGET_CASES = ("xts-encrypt", "xts-decrypt", "ctr-wal", "xts-temp")


def report(rows, p, out_dir):
    md = [
        "ns per 8 kB page (median of rounds).  `xts-*` is the cipher alone on bytes 16..8191 as the server "
        "runs it (context reused, tweak reset per page); `write-path` adds the checksum over the "
        "ciphertext, `read-path` the checksum check over the ciphertext and decryption; `ctr-wal` is the "
        "WAL's AES-CTR over 8 kB at its offset, `xts-temp` a temporary file's 8 kB block (tweak, "
        "XTS with one 8 kB data unit from the caller's block into the write buffer).  `openssl-speed` is `openssl speed -evp aes-*-xts -bytes 8192` of the "
        "OpenSSL the server links, `openssl-speed-system` the same with the machine's `openssl`, "
        f"`openssl-wheel` the OpenSSL in PyPI's `cryptography` wheel{_wheel_version(rows)} on 1 MiB per call "
        "(one data unit for XTS), per 8 kB; the limit is the fastest of them (`-ctr`: the same for "
        "AES-CTR).\n",
        "| cipher | case | ns/page | GB/s | vs limit |",
        "|---|---|---|---|---|",
    ]
    labels, values, verdicts = [], [], []
    for cipher in ("aes-128", "aes-256"):
        limit = {}
        for mode, suffix in (("xts", ""), ("ctr", "-ctr")):
            refs = [_median(rows, cipher, k + suffix, "ns_per_page") for k in LIMIT_CASES]
            refs = [x for x in refs if x == x]
            limit[mode] = min(refs) if refs else float("nan")
        for case in (
            "xts-encrypt",
            "xts-decrypt",
            "write-path",
            "read-path",
            "ctr-wal",
            "xts-temp",
            *LIMIT_CASES,
            *(k + "-ctr" for k in LIMIT_CASES),
        ):
            ns = _median(rows, cipher, case, "ns_per_page")
            gb = _median(rows, cipher, case, "gb_per_s")
            if ns != ns:
                continue
            ref = limit["ctr" if "ctr" in case else "xts"]
            md.append(f"| {cipher} | {case} | {ns:,.0f} | {gb:.2f} | {ns / ref:.2f}× |")
            labels.append(f"{cipher} {case}")
            values.append(ns)
            if case in TARGET_CASES and ref == ref:
                verdicts.append(
                    f"{cipher} {case}: {ns / ref:.2f}× the limit — "
                    + ("met" if ns / ref <= 1.2 else "not met")
                )
    md.append(
        "\nTarget for the page cipher alone, the WAL's CTR and the temporary files' XTS: within "
        "1.2× of the limit's time per 8 kB (XTS's limit for the XTS cases, CTR's for `ctr-wal`)."
    )
    md += [f"- {v}" for v in verdicts]
    pngs = []
    if labels and plots.bars(
        labels,
        values,
        os.path.join(out_dir, f"{NAME}-ns-per-page.png"),
        "Page cipher, ns per 8 kB page",
        "ns per page (lower is better)",
    ):
        pngs.append(f"{NAME}-ns-per-page.png")
    return "\n".join(md), pngs
