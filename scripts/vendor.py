#!/usr/bin/env python3
"""vendor.py — third-party sources that no registry here serves (Citus,
pgBackRest, open_pg_tde, pgvector and TimescaleDB for PostgreSQL 18), one
pin each in scripts/vendor.tsv: the file's name, the upstream release URL
and a hash that both the upstream archive and ../shared/vendor's copy
satisfy.

The hash is of the tree, not of the archive: SHA-256 over one line per
regular file and symbolic link, sorted by path, "PATH MODE SHA256" (the
path without the archive's top directory, MODE x or - for the executable
bit, SHA256 of the content or "-> TARGET" for a link).  A `git archive`
made with another --prefix, another compression or another umask (GitHub's
archive of a tag, the vendored copy) hashes the same; a changed file does
not.  A pin may leave paths out (globs), where the vendored copy left a
file out of the tag.

  vendor.py get NAME [--vendor DIR] [--dest DIR] [--mirror URL] [--tag TAG]
      prints the path of NAME's archive, checked: ../shared/vendor's copy
      (--vendor, $PGCIPHER_VENDOR), else one downloaded before into --dest,
      else downloaded now from the pin's URL (or MIRROR/FILE) into --dest
      with progress.  Exit 2, with one plain line on stderr, where neither
      can be had; 1 where a file's hash differs (a download that does is
      removed).  Messages begin with TAG (default "vendor").
  vendor.py hash ARCHIVE [--exclude GLOB ...]   prints the tree hash
  vendor.py list                                 prints the pins
"""

import argparse
import fnmatch
import hashlib
import os
import sys
import tarfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PINS = os.environ.get("PGCIPHER_VENDOR_PINS", os.path.join(HERE, "vendor.tsv"))  # another table: tests


def pins():
    """The pins of vendor.tsv: name -> dict(file, hash, url, exclude)."""
    out = {}
    with open(PINS, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            name, file, digest, url, *rest = line.rstrip("\n").split("\t")
            out[name] = dict(file=file, hash=digest, url=url, exclude=[g for g in rest if g])
    return out


def tree_hash(path, exclude=()):
    """The tree hash of a tar archive (any compression tarfile reads)."""
    lines = []
    with tarfile.open(path) as tar:
        for m in tar:
            parts = m.name.split("/", 1)
            if len(parts) < 2 or not parts[1] or not (m.isfile() or m.issym()):
                continue
            rel = parts[1].rstrip("/")
            if any(fnmatch.fnmatch(rel, g) for g in exclude):
                continue
            if m.issym():
                what = "-> " + m.linkname
            else:
                h = hashlib.sha256()
                with tar.extractfile(m) as data:
                    for chunk in iter(lambda: data.read(1 << 20), b""):
                        h.update(chunk)
                what = h.hexdigest()
            lines.append(f"{rel} {'x' if m.mode & 0o111 else '-'} {what}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()


def download(url, dest, tag):
    """url into dest, with a progress line every few seconds."""
    part = dest + ".part"
    with urllib.request.urlopen(url, timeout=60) as r, open(part, "wb") as f:
        total = int(r.headers.get("Content-Length") or 0)
        got, last = 0, 0.0
        for chunk in iter(lambda: r.read(1 << 16), b""):
            f.write(chunk)
            got += len(chunk)
            if time.monotonic() - last > 2 or (total and got == total):
                last = time.monotonic()
                of = f" of {total / 1e6:.1f}" if total else ""
                print(f"{tag}: {os.path.basename(dest)}: {got / 1e6:.1f}{of} MB", file=sys.stderr, flush=True)
    os.replace(part, dest)


def get(name, vendor, dest, mirror, tag="vendor"):
    p = pins().get(name)
    if p is None:
        print(f"{tag}: no pin named {name} in {PINS}", file=sys.stderr)
        return 1
    candidates = [os.path.join(vendor, p["file"])] if vendor else []
    candidates.append(os.path.join(dest, p["file"]))
    for path in candidates:
        if os.path.isfile(path):
            got = tree_hash(path, p["exclude"])
            if got != p["hash"]:
                print(f"{tag}: {path}: tree hash {got}, pinned {p['hash']}", file=sys.stderr)
                return 1
            print(path)
            return 0
    url = mirror.rstrip("/") + "/" + p["file"] if mirror else p["url"]
    os.makedirs(dest, exist_ok=True)
    path = os.path.join(dest, p["file"])
    print(f"{tag}: {name}: not in {vendor or '(no vendor directory)'}; downloading {url}", file=sys.stderr)
    try:
        download(url, path, tag)
    except OSError as e:  # urllib's errors are OSErrors
        print(
            f"{tag}: SKIPPED: {name} is neither in {vendor or 'a vendor directory'} nor downloadable "
            f"from {url} ({e}); put {p['file']} there or set PGCIPHER_VENDOR",
            file=sys.stderr,
        )
        return 2
    got = tree_hash(path, p["exclude"])
    if got != p["hash"]:
        os.remove(path)
        print(f"{tag}: {url}: tree hash {got}, pinned {p['hash']}: removed", file=sys.stderr)
        return 1
    print(path)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("get")
    g.add_argument("name")
    top = os.path.dirname(HERE)
    g.add_argument(
        "--vendor", default=os.environ.get("PGCIPHER_VENDOR", os.path.join(top, "..", "shared", "vendor"))
    )
    g.add_argument(
        "--dest", default=os.path.join(os.environ.get("PGCIPHER_BUILD", os.path.join(top, "build")), "source")
    )
    g.add_argument("--mirror", default=os.environ.get("PGCIPHER_VENDOR_MIRROR", ""))
    g.add_argument("--tag", default="vendor", help="the first word of each message")
    h = sub.add_parser("hash")
    h.add_argument("archive")
    h.add_argument("--exclude", action="append", default=[])
    sub.add_parser("list")
    a = ap.parse_args(argv)
    if a.cmd == "hash":
        print(tree_hash(a.archive, a.exclude))
        return 0
    if a.cmd == "list":
        for name, p in sorted(pins().items()):
            print(name, p["file"], p["url"], *p["exclude"])
        return 0
    return get(a.name, os.path.normpath(a.vendor), a.dest, a.mirror, a.tag)


if __name__ == "__main__":
    sys.exit(main())
