"""What the report states about the machine and the software."""

import os
import platform
import subprocess
import sys


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _cmd(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def linked_openssl(prefix):
    """(path, version) of the libcrypto an install's postgres loads."""
    ldd = _cmd(["ldd", os.path.join(prefix, "bin", "postgres")])
    path = next(
        (
            line.split("=>")[1].split()[0]
            for line in ldd.splitlines()
            if "libcrypto.so" in line and "=>" in line
        ),
        "",
    )
    if not path:
        return "", ""
    # ask the library itself, in a child so this process keeps its own
    version = _cmd(
        [
            sys.executable,
            "-c",
            "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
            "lib.OpenSSL_version.restype = ctypes.c_char_p; print(lib.OpenSSL_version(0).decode())",
            path,
        ]
    )
    return path, version


def collect(installs):
    cpuinfo = _read("/proc/cpuinfo")
    model = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
        platform.processor(),
    )
    flags = next(
        (line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), []
    )
    mem_kb = next(
        (int(line.split()[1]) for line in _read("/proc/meminfo").splitlines() if line.startswith("MemTotal")),
        0,
    )
    info = {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "aes_ni": "aes" in flags,
        "vaes": "vaes" in flags,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "os": _read("/etc/os-release").split("PRETTY_NAME=")[-1].splitlines()[0].strip('"')
        if "PRETTY_NAME=" in _read("/etc/os-release")
        else platform.platform(),
        "openssl": _cmd(["openssl", "version"]),
        "python": platform.python_version(),
        "installs": {},
    }
    for name, inst in installs.items():
        libcrypto, openssl = linked_openssl(inst.prefix)
        info["installs"][name] = {
            "libcrypto": libcrypto,
            "openssl": openssl,
            "prefix": inst.prefix,
            "version": inst.pg_config("--version"),
            "cc": inst.pg_config("--cc"),
            "cflags": inst.pg_config("--cflags"),
            "configure": inst.pg_config("--configure"),
            "compiler_version": _cmd([inst.pg_config("--cc").split()[-1], "--version"]).splitlines()[0]
            if inst.pg_config("--cc")
            else "",
        }
    return info
