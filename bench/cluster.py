"""Clusters the benchmarks create and remove: initdb, start on a free
local port with a Unix socket in the work directory, pgbench and psql
against it, stop.  Nothing here touches a server it did not start."""

import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

from bench import peer


@dataclass(frozen=True)
class Config:
    """One benchmark configuration: which binaries, which encryption."""

    name: str  # "stock", "stock-2", "pgcipher-off", "aes-128", "aes-256", "open_pg_tde", ...
    install: str  # "stock", "pgcipher" or "open_pg_tde" (bench/peer)
    encryption: str = None  # pgcipher's initdb --encryption: None, "aes-128" or "aes-256"
    checksums: bool = True
    # a peer's TDE, set up by Cluster.initdb: None or "open_pg_tde" (bench/peer)
    peer: str = None

    @property
    def cipher(self):
        """The AES key size its pages and WAL are encrypted with, or None."""
        return self.encryption or (peer.CIPHER if self.peer else None)


STANDARD_CONFIGS = {
    "stock": Config("stock", "stock"),
    # a second, identical stock server: stock-2 / stock is the noise floor,
    # what this machine alone does to a ratio
    "stock-2": Config("stock-2", "stock"),
    "pgcipher-off": Config("pgcipher-off", "pgcipher"),
    "aes-128": Config("aes-128", "pgcipher", "aes-128"),
    "aes-256": Config("aes-256", "pgcipher", "aes-256"),
    # the open-source peer, where built (bench/peer): scenarios list it through peer.with_peer
    peer.NAME: Config(peer.NAME, peer.NAME, peer=peer.NAME),
}


class Install:
    """A PostgreSQL installation prefix (stock or pgcipher)."""

    def __init__(self, name, prefix):
        self.name = name
        self.prefix = prefix
        self.bindir = os.path.join(prefix, "bin")
        if not os.path.exists(os.path.join(self.bindir, "postgres")):
            raise FileNotFoundError(f"no PostgreSQL installation in {prefix} (run ./pgcipher build)")

    def bin(self, program):
        return os.path.join(self.bindir, program)

    def pg_config(self, option):
        return subprocess.run(
            [self.bin("pg_config"), option], capture_output=True, text=True, check=True
        ).stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, install, config, workdir, settings, key_file):
        self.install = install
        self.config = config
        self.dir = os.path.join(workdir, config.name)
        self.data = os.path.join(self.dir, "data")
        self.settings = dict(settings)
        self.key_file = key_file
        self.port = None
        self.running = False

    def _run(self, args, timeout=None, **kw):
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)

    def initdb(self, extra_args=()):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        args = [
            self.install.bin("initdb"),
            "-D",
            self.data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-instructions",
            "-E",
            "UTF8",
            "--locale=C",
        ]
        if self.config.checksums:
            args.append("--data-checksums")
        if self.config.encryption:
            args += [
                f"--encryption={self.config.encryption}",
                f"--encryption-key-command=cat {self.key_file}",
            ]
        args += list(extra_args)
        r = self._run(args)
        if r.returncode != 0:
            raise RuntimeError(f"initdb for {self.config.name} failed:\n{r.stdout}\n{r.stderr}")
        if self.config.peer == peer.NAME:
            self._set_up_open_pg_tde()

    def _conf(self, text):
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(text)

    def _set_up_open_pg_tde(self):
        """open_pg_tde's keys and extension (bench/peer): its library loaded, a
        server started once on a private socket to create the extension in
        template1 and postgres, the file keyring provider and the principal key
        (default and server key), stopped; then WAL encryption and tde_heap as
        the default access method in postgresql.conf for every later start."""
        self._conf("\n# open_pg_tde (bench/peer)\n" + peer.conf_lines(peer.CONF_BOOT))
        self.port = free_port()
        log = os.path.join(self.dir, "setup.log")
        opts = f"-c port={self.port} -c listen_addresses='' -c unix_socket_directories='{self.dir}'"
        r = self._run(
            [self.install.bin("pg_ctl"), "-D", self.data, "-l", log, "-o", opts, "-w", "-t", "120", "start"]
        )
        if r.returncode != 0:
            raise RuntimeError(
                f"could not start {self.config.name} to set up open_pg_tde: {r.stderr}\n" + _tail(log)
            )
        self.running = True
        try:
            keyring = os.path.join(self.dir, peer.KEYRING_FILE)
            for db, statements in peer.setup_sql(keyring).items():
                for sql in statements:
                    self.psql(sql, db=db)
        finally:
            self.stop()
        self._conf(peer.conf_lines(peer.CONF_KEYED))

    def start(self):
        self.port = free_port()
        conf = {"listen_addresses": "''"}  # Unix socket only, unless a scenario asks for TCP
        conf.update(self.settings)
        conf.update(port=self.port, unix_socket_directories=f"'{self.dir}'")
        self._conf("\n# bench\n" + "".join(f"{k} = {v}\n" for k, v in conf.items()))
        r = self._run(
            [
                self.install.bin("pg_ctl"),
                "-D",
                self.data,
                "-l",
                os.path.join(self.dir, "server.log"),
                "-w",
                "-t",
                "120",
                "start",
            ]
        )
        if r.returncode != 0:
            raise RuntimeError(
                f"could not start {self.config.name}: {r.stderr}\n"
                + open(os.path.join(self.dir, "server.log")).read()[-2000:]
            )
        self.running = True

    def stop(self, mode="fast"):
        if self.running:
            self._run([self.install.bin("pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop"])
            self.running = False

    def destroy(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def conninfo(self):
        return ["-h", self.dir, "-p", str(self.port), "-U", "postgres"]

    def psql(self, sql, db="postgres", timeout=3600):
        r = self._run(
            [
                self.install.bin("psql"),
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                *self.conninfo(),
                "-d",
                db,
                "-c",
                sql,
            ],
            timeout=timeout,
        )
        if r.returncode != 0:
            raise RuntimeError(f"psql on {self.config.name} failed: {r.stderr.strip()}\nSQL: {sql[:500]}")
        return r.stdout.strip()

    def psql_file(self, path, db="postgres", timeout=3600, variables=None):
        setvars = [a for k, v in (variables or {}).items() for a in ("-v", f"{k}={v}")]
        r = self._run(
            [
                self.install.bin("psql"),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                *setvars,
                *self.conninfo(),
                "-d",
                db,
                "-f",
                path,
            ],
            timeout=timeout,
        )
        if r.returncode != 0:
            raise RuntimeError(f"psql -f {path} on {self.config.name} failed: {r.stderr.strip()}")
        return r.stdout

    def pgbench(self, args, timeout=None, db="postgres"):
        """Run pgbench; returns (parsed metrics or {} for -i, command line, output)."""
        cmd = [self.install.bin("pgbench"), *self.conninfo(), *args, db]
        r = self._run(cmd, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"pgbench on {self.config.name} failed: {r.stderr.strip()[-1500:]}")
        return ({} if "-i" in args else parse_pgbench(r.stdout)), " ".join(cmd), r.stdout

    def buffer_hit_ratio(self):
        return float(
            self.psql(
                "SELECT coalesce(sum(blks_hit)::float8 / nullif(sum(blks_hit + blks_read), 0), 0) FROM pg_stat_database"
            )
        )

    def reset_stats(self):
        self.psql("SELECT pg_stat_reset()")


def _tail(path, n=2000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def parse_pgbench(out):
    m = {}
    t = re.search(r"^tps = ([\d.]+)", out, re.M)
    if t:
        m["tps"] = float(t.group(1))
    lat = re.search(r"^latency average = ([\d.]+) ms", out, re.M)
    if lat:
        m["latency_ms"] = float(lat.group(1))
    n = re.search(r"number of transactions actually processed: (\d+)", out)
    if n:
        m["transactions"] = int(n.group(1))
    if "tps" not in m:
        raise RuntimeError("could not parse pgbench output:\n" + out[-1000:])
    return m


def wait_for(predicate, timeout=60, interval=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
