#!/usr/bin/env python3
"""like_debian.py — is the installed pgcipher server configured and furnished
like Debian's own PostgreSQL of the same upload?

test/packages/run.sh runs it on the host after the clean root's checks,
with the log in which in-root.sh printed what the installed packages say:

    # pg_config --configure: '--with-tcl' ...
    # pg_available_extensions: adminpack amcheck ...

The reference is Debian's binary packages of the pinned upload
(debian-reference.tsv: the client package's pg_config, the server's and the
procedural languages' extension control files), fetched from the Debian
mirror's pool into BUILD/source and sha256-checked.  Two checks, each a TAP
line:

1. pg_config --configure matches Debian's but for what may differ, each
   for a stated reason (RULES below): the installation paths Debian's
   build system adds, the compiler's name, the LLVM version (Debian 12's
   LLVM, not sid's), the flags' file prefix map (a path), the version
   string, and our OpenSSL (--with-includes, --with-libraries and the run
   path in LDFLAGS).  Every other option must be in both.
2. pg_available_extensions equals the extensions of Debian's packages,
   plus pgcipher_columns (ours), and nothing else.

With --options, no package is needed: for each major named, what
server/debian-options.sh gives (the feature options, the tools and the
compiler flags every build of ours takes) against the same reference's
pg_config --configure, by the same rules (the suite debian-options, both
majors, without a build).

Usage: like_debian.py BUILD_DIR MAJOR LOG
       like_debian.py --options BUILD_DIR MAJOR...
"""

import hashlib
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
TOP = HERE.parent.parent

# Options Debian's build system (dh_auto_configure) adds before
# postgresql.mk's: they choose nothing in PostgreSQL's build
BUILD_SYSTEM = {
    "--build",
    "--disable-option-checking",
    "--disable-silent-rules",
    "--disable-maintainer-mode",
    "--disable-dependency-tracking",
    "--infodir",
    "--localstatedir",
    "--runstatedir",
    "build_alias",
}
# Options whose value is a directory of the layout: the last one wins,
# and where both name one, they must agree
PATHS = {
    "--prefix",
    "--includedir",
    "--mandir",
    "--sysconfdir",
    "--libdir",
    "--docdir",
    "--datarootdir",
    "--datadir",
    "--bindir",
    "--libexecdir",
}
# Options ours has and Debian's has not: the OpenSSL 3.5 we link
# (server/openssl.sh)
OURS_ONLY = {"--with-includes", "--with-libraries"}
# Named for the build, not a feature: the compiler's name (gcc, which
# pg_config hands extensions as one word, is Debian's x86_64-linux-gnu-gcc)
# and the version string (ours names pgcipher)
NAMES = {"CC", "CXX", "--with-extra-version"}
# The tools whose version is the system's: Debian 12's LLVM
VERSIONED = {"LLVM_CONFIG", "CLANG"}
FLAGS = {"CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS"}
# A flag ours may add: the run path of our OpenSSL
OUR_FLAGS = {"-Wl,-rpath,/usr/lib/pgcipher/openssl"}

EXTENSIONS_OURS = {"pgcipher_columns"}


def mirror():
    """The Debian mirror of this machine's apt configuration
    (scripts/debian-mirror.sh), else Debian's own."""
    r = subprocess.run([str(TOP / "scripts" / "debian-mirror.sh")], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "http://deb.debian.org/debian"


def reference_debs(build, major, only=""):
    """Debian's packages of the pinned upload (those whose name starts with
    only): fetched once, checked always."""
    dest = pathlib.Path(build) / "source" / "debian-debs"
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for line in (HERE / "debian-reference.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m, name, sha = line.split("\t")
        if m != str(major) or not name.startswith(only):
            continue
        path = dest / name
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            source = name.split("_")[0]
            source = re.sub(
                r"^postgresql-(client-|plperl-|plpython3-|pltcl-)?(\d+)$", r"postgresql-\2", source
            )
            url = f"{mirror()}/pool/main/p/{source}/{name}"
            print(f"# fetching {url}", flush=True)
            tmp = path.with_suffix(".part")
            with urllib.request.urlopen(url, timeout=120) as r, open(tmp, "wb") as f:
                f.write(r.read())
            tmp.rename(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != sha:
            raise SystemExit(f"like_debian: {name}: sha256 {digest}, pinned {sha}")
        out.append(path)
    if not out:
        raise SystemExit(f"like_debian: no reference packages for {major} in debian-reference.tsv")
    return out


def deb_files(deb):
    """The paths a .deb holds."""
    listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, capture_output=True).stdout
    names = subprocess.run(["tar", "-t"], input=listing, check=True, capture_output=True).stdout
    return [n.decode().lstrip(".") for n in names.splitlines()]


def debian_configure(debs, major):
    """pg_config --configure of Debian's client package (the string it holds)."""
    client = next(d for d in debs if d.name.startswith(f"postgresql-client-{major}_"))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", str(client), tmp], check=True)
        binary = pathlib.Path(tmp) / f"usr/lib/postgresql/{major}/bin/pg_config"
        data = binary.read_bytes()
    # the configure arguments, one string among the program's constants
    for s in re.findall(rb"[\x20-\x7e]{200,}", data):
        if b"'--with-" in s:
            return s.decode().strip()
    raise SystemExit("like_debian: no configure arguments in Debian's pg_config")


def parse(configure):
    """The arguments as (name, value) pairs; a bare option's value is None."""
    out = []
    for word in shlex.split(configure):
        name, eq, value = word.partition("=")
        out.append((name, value.strip() if eq else None))
    return out


def normalise(args):
    """The arguments that must agree, and the layout's directories."""
    keep, dirs = [], {}
    for name, value in args:
        if name in BUILD_SYSTEM or name in NAMES or name in OURS_ONLY:
            continue
        if name in PATHS:
            dirs[name] = value
        elif name in VERSIONED:
            keep.append((name, re.sub(r"-\d+$", "-N", value)))
        elif name in FLAGS:
            flags = {f for f in value.split() if not f.startswith("-ffile-prefix-map=")} - OUR_FLAGS
            keep.append((name, " ".join(sorted(flags))))
        else:
            keep.append((name, value))
    return sorted(keep, key=lambda kv: (kv[0], kv[1] or "")), dirs


def show(pairs):
    return ", ".join(n if v is None else f"{n}={v}" for n, v in pairs) or "nothing"


def check_configure(ours, debian):
    o, odirs = normalise(parse(ours))
    d, ddirs = normalise(parse(debian))
    problems = []
    only_ours = [kv for kv in o if kv not in d]
    only_debian = [kv for kv in d if kv not in o]
    if only_ours:
        problems.append(f"only ours: {show(only_ours)}")
    if only_debian:
        problems.append(f"only Debian's: {show(only_debian)}")
    for name in sorted(set(odirs) & set(ddirs)):
        if odirs[name] != ddirs[name]:
            problems.append(f"{name}: ours {odirs[name]}, Debian's {ddirs[name]}")
    return problems, len(o)


def debian_extensions(debs, major):
    names = set()
    for deb in debs:
        for path in deb_files(deb):
            m = re.fullmatch(rf"/usr/share/postgresql/{major}/extension/(.+)\.control", path)
            if m:
                names.add(m.group(1))
    return names


def options_configure(major):
    """server/debian-options.sh's options, tools and flags for major, as
    configure arguments."""
    script = (
        f'. "{TOP}/server/debian-options.sh"; debian_options {major} || exit 1; '
        'printf "%s\\n" "${debian_features[@]}" "${debian_tools[@]}" "CFLAGS=$debian_cflags" '
        '"CPPFLAGS=$debian_cppflags" "CXXFLAGS=$debian_cxxflags" "LDFLAGS=$debian_ldflags"'
    )
    words = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout
    return " ".join(shlex.quote(w) for w in words.splitlines())


def check_options(build, majors):
    rc = 0
    for major in majors:
        debs = reference_debs(build, major, f"postgresql-client-{major}_")
        problems, n = check_configure(options_configure(major), debian_configure(debs, major))
        upload = debs[0].name.split("_")[1]
        if problems:
            rc = 1
            print(
                f"not ok - server/debian-options.sh {major} is Debian's {upload}'s configure but for LLVM's version"
            )
            for p in problems:
                print(f"#   {p}")
        else:
            print(
                f"ok - server/debian-options.sh {major}: {n} options, tools and flags, "
                f"Debian's {upload}'s but for LLVM's version"
            )
    return rc


def main():
    if sys.argv[1] == "--options":
        return check_options(sys.argv[2], sys.argv[3:])
    build, major, log = sys.argv[1], sys.argv[2], sys.argv[3]
    text = pathlib.Path(log).read_text(errors="replace")
    m = re.search(r"^# pg_config --configure: (.*)$", text, re.M)
    e = re.search(r"^# pg_available_extensions: (.*)$", text, re.M)
    if not m or not e:
        print("not ok - like Debian: the root's log lacks pg_config --configure or pg_available_extensions")
        return 1
    debs = reference_debs(build, major)
    rc = 0
    problems, n = check_configure(m.group(1), debian_configure(debs, major))
    if problems:
        rc = 1
        print(
            f"not ok - pg_config --configure is Debian's {debs[0].name.split('_')[1]}'s but for paths, names and our OpenSSL"
        )
        for p in problems:
            print(f"#   {p}")
    else:
        print(
            f"ok - pg_config --configure is Debian's {debs[0].name.split('_')[1]}'s ({n} options alike) "
            "but for paths, names, LLVM's version and our OpenSSL"
        )
    ours = set(e.group(1).split())
    theirs = debian_extensions(debs, major)
    missing, extra = theirs - ours, ours - theirs - EXTENSIONS_OURS
    if missing or extra:
        rc = 1
        print(
            "not ok - pg_available_extensions is Debian's (server and procedural languages) plus pgcipher_columns"
        )
        print(
            f"#   missing: {' '.join(sorted(missing)) or 'none'}; not in Debian's: {' '.join(sorted(extra)) or 'none'}"
        )
    else:
        print(
            f"ok - pg_available_extensions is Debian's {len(theirs)} (server and procedural languages) "
            "plus pgcipher_columns"
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
