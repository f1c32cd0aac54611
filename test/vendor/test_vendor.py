"""test_vendor.py — scripts/vendor.py, the third-party sources a clone
without ../shared downloads: a source served by a local HTTP server (as
upstream's archive of a tag: another top directory, another compression
and modes) is downloaded with progress, checked by its tree hash and used;
a served file whose content differs is refused and removed; a source that
neither the vendor directory nor the server has is a plain skip (exit 2);
the vendored copy is used without a download.  Where ../shared/vendor is
there, the same with the real pgvector pin.  Standard library only.

Run: python3 test/vendor/test_vendor.py   (scripts/test.sh's suite vendor)"""

import functools
import http.server
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENDOR_PY = os.path.join(TOP, "scripts", "vendor.py")
SHARED = os.path.normpath(os.path.join(TOP, "..", "shared", "vendor"))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import vendor  # noqa: E402


def make_tar(path, prefix, files, mode=0o644, compress="gz"):
    """A tar archive of files {name: bytes} under prefix/."""
    with tarfile.open(path, "w:" + compress) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(prefix + "/" + name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))


def reprefix(src, dst, prefix):
    """src's members under another top directory, gzip-compressed anew."""
    with tarfile.open(src) as a, tarfile.open(dst, "w:gz") as b:
        for m in a:
            parts = m.name.split("/", 1)
            m.name = prefix + ("/" + parts[1] if len(parts) > 1 else "")
            b.addfile(m, a.extractfile(m) if m.isfile() else None)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Server:
    """A local HTTP server of one directory, on a free port."""

    def __init__(self, root):
        handler = functools.partial(QuietHandler, directory=root)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class VendorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.vendor, self.dest, self.served = (os.path.join(d, x) for x in ("vendor", "dest", "served"))
        for x in (self.vendor, self.served):
            os.makedirs(x)
        self.files = {"README": b"hello\n", "src/a.c": b"int a;\n", "t/big.tar.gz": b"fixture"}
        # the vendored copy: git archive's form, one fixture left out
        make_tar(
            os.path.join(self.vendor, "toy-1.0.tar.gz"),
            "toy-1.0",
            {k: v for k, v in self.files.items() if k != "t/big.tar.gz"},
        )
        digest = vendor.tree_hash(os.path.join(self.vendor, "toy-1.0.tar.gz"))
        self.pins = os.path.join(d, "vendor.tsv")
        with open(self.pins, "w") as f:
            f.write(f"toy\ttoy-1.0.tar.gz\t{digest}\thttp://127.0.0.1:9/toy.tar.gz\tt/*.tar.gz\n")
            f.write(f"missing\tmissing-1.tar.gz\t{digest}\thttp://127.0.0.1:9/missing.tar.gz\n")
        self.server = Server(self.served)

    def tearDown(self):
        self.server.close()
        self.dir.cleanup()

    def get(self, name, vendor_dir, mirror=None, pins=None):
        env = dict(os.environ, PGCIPHER_VENDOR_PINS=pins or self.pins)
        cmd = [sys.executable, VENDOR_PY, "get", name, "--vendor", vendor_dir, "--dest", self.dest]
        if mirror:
            cmd += ["--mirror", mirror]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)

    def test_vendored_copy_is_used(self):
        r = self.get("toy", self.vendor)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.join(self.vendor, "toy-1.0.tar.gz"))
        self.assertFalse(os.path.exists(self.dest))

    def test_download_upstream_form(self):
        # upstream's archive: another top directory, xz, executable modes,
        # the fixture the vendored copy left out
        make_tar(
            os.path.join(self.served, "toy-1.0.tar.gz"),
            "toy-v1.0-upstream",
            self.files,
            mode=0o664,
            compress="xz",
        )
        r = self.get("toy", os.path.join(self.dir.name, "none"), self.server.url)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("downloading", r.stderr)
        self.assertRegex(r.stderr, r"toy-1.0.tar.gz: [0-9.]+ of [0-9.]+ MB")  # progress
        got = r.stdout.strip()
        self.assertEqual(got, os.path.join(self.dest, "toy-1.0.tar.gz"))
        with tarfile.open(got) as tar:
            self.assertIn("toy-v1.0-upstream/src/a.c", tar.getnames())
        # the second time, the download is used without the server
        self.server.close()
        r = self.get("toy", os.path.join(self.dir.name, "none"), "http://127.0.0.1:9")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, got), r.stderr)
        self.server = Server(self.served)

    def test_changed_file_refused(self):
        changed = dict(self.files, **{"src/a.c": b"int a = 1;\n"})
        make_tar(os.path.join(self.served, "toy-1.0.tar.gz"), "toy-1.0", changed)
        r = self.get("toy", os.path.join(self.dir.name, "none"), self.server.url)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("tree hash", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dest, "toy-1.0.tar.gz")))
        self.assertEqual(r.stdout, "")

    def test_changed_mode_refused(self):
        make_tar(os.path.join(self.served, "toy-1.0.tar.gz"), "toy-1.0", self.files, mode=0o755)
        r = self.get("toy", os.path.join(self.dir.name, "none"), self.server.url)
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_changed_vendored_copy_refused(self):
        make_tar(os.path.join(self.vendor, "toy-1.0.tar.gz"), "toy-1.0", {"README": b"other\n"})
        r = self.get("toy", self.vendor, self.server.url)
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_nowhere_is_a_plain_skip(self):
        r = self.get("missing", self.vendor, self.server.url)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("SKIPPED", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 2, r.stderr)  # the download line, the skip line

    @unittest.skipUnless(os.path.exists(os.path.join(SHARED, "pgvector-0.8.6.tar.gz")), "no ../shared/vendor")
    def test_real_pin_github_form(self):
        # pgvector's vendored copy as GitHub names its archive's top directory
        reprefix(
            os.path.join(SHARED, "pgvector-0.8.6.tar.gz"),
            os.path.join(self.served, "pgvector-0.8.6.tar.gz"),
            "pgvector-0.8.6-github",
        )
        r = self.get("pgvector", os.path.join(self.dir.name, "none"), self.server.url, pins=vendor.PINS)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
