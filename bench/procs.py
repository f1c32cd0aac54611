"""procs.py — processes beside the server, and what they cost: the CPU
seconds of a process and its children (/proc), a server's CPU per
measurement (ServerCPU), RSS, pgcipher-proxy and PgBouncer started as
daemons, idle connections, a byte-counting TCP relay, pgbench and psql
over TCP.  Used by the scenarios that measure a hop or a process tree
(proxy, proxy-orm, alibaba-sysbench, aio, citus) and by
bench/device/many_cores.py."""

import os
import shutil
import socket
import struct
import subprocess
import threading
import time

from bench.cluster import free_port, parse_pgbench, wait_for

# ---------------------------------------------------------------- /proc

_CLK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    """/proc/PID/stat after the command name: [0] state (field 3), [1] ppid,
    [11] utime, [12] stime, [13] cutime, [14] cstime (fields 14-17), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2 :].split()


def process_cpu_s(pid):
    f = stat_fields(pid)
    return (int(f[11]) + int(f[12])) / _CLK


def process_user_system_s(pid):
    """A process's CPU seconds: (user + system, user alone)."""
    f = stat_fields(pid)
    return (int(f[11]) + int(f[12])) / _CLK, int(f[11]) / _CLK


def _child_stats(pid):
    """{pid: stat_fields} of pid's children, zombies included."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                f = stat_fields(entry)
            except (OSError, ValueError):
                continue
            if int(f[1]) == pid:
                out[int(entry)] = f
    return out


def _children(pid):
    return list(_child_stats(pid).values())


def child_states(pid):
    """{pid: state} of pid's children, zombies ("Z": exited, not reaped
    yet) included."""
    return {p: st for p, (st, _) in _child_ticks(pid).items()}


def _child_ticks(pid):
    """{pid: (state, utime + stime)} of pid's children."""
    return {p: (f[0], int(f[11]) + int(f[12])) for p, f in _child_stats(pid).items()}


def tree_cpu_s(pid, attempts=100):
    """CPU seconds of a server: the postmaster's own and its reaped
    children's (cutime, cstime), plus its live children's (a zombie still
    shows its own times).

    Read consistently: a child the postmaster reaps while its children are
    being listed would otherwise be counted in neither term (reaped after
    the postmaster's counters were read, gone before it was listed: a whole
    run's backends, exiting together, can vanish so) or in both.  So the
    postmaster's reaped-children counters are read before and after the
    listing, and the reading is repeated until they agree."""
    for _ in range(attempts):
        f0 = stat_fields(pid)
        kids = _children(pid)
        f1 = stat_fields(pid)
        if f0[13:15] == f1[13:15]:
            break
    ticks = sum(int(x) for x in f1[11:15])
    ticks += sum(int(c[11]) + int(c[12]) for c in kids)
    return ticks / _CLK


def settle_children(pid, before=(), timeout=5.0, quiet=0.25, interval=0.01):
    """Wait until the server is at rest after a run: no zombie children
    (exited, not reaped yet) and every child that was not among `before`
    (pids) gone; where children outlive the run (PgBouncer's server
    connections), until its children, and the CPU each has used, have
    stayed the same for `quiet` seconds (a backend still working is not at
    rest).  Returns (the live children's pids, settled)."""
    before = set(before)
    deadline = time.time() + timeout
    last, since = None, time.time()
    while True:
        kids = _child_ticks(pid)
        now = time.time()
        ticks = {p: t for p, (_, t) in kids.items()}
        if ticks != last:
            last, since = ticks, now
        zombies = any(st == "Z" for st, _ in kids.values())
        if not zombies and (set(kids) <= before or now - since >= quiet):
            return set(kids), True
        if now >= deadline:
            return {p for p, (st, _) in kids.items() if st != "Z"}, False
        time.sleep(interval)


class ServerCPU:
    """The CPU a server uses per run: read() before and after each run.

    Each reading waits until the backends of the run that just ended have
    exited and been reaped by the postmaster (settle_children), then reads
    tree_cpu_s.  Read at once, as pgbench or sysbench exits, the backends
    still exiting (their last CPU lands in the next run) and the reaping of
    those already gone race with the reading: six 2-s pgbench runs in a row
    read 2.08, 1.99, 1.93, 1.18, 0.01 and 1.81 server CPU-seconds."""

    def __init__(self, pid, timeout=5.0):
        self.pid, self.timeout = pid, timeout
        self.pids, _ = settle_children(pid, timeout=timeout)
        self.settled = True

    def read(self):
        """The server's CPU seconds so far; self.settled says whether it
        came to rest within the timeout."""
        self.pids, self.settled = settle_children(self.pid, self.pids, self.timeout)
        return tree_cpu_s(self.pid)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def postmaster_pid(c):
    with open(os.path.join(c.data, "postmaster.pid")) as f:
        return int(f.readline())


# ---------------------------------------------------------------- processes


class Daemon:
    """A process this scenario starts and stops (the proxy, PgBouncer),
    listening on 127.0.0.1:port, its output in a log file."""

    def __init__(self, name, args, port, log, env=None):
        self.name, self.args, self.port, self.log = name, args, port, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        self.pid = self.proc.pid
        try:
            if not wait_for(self._ready, timeout=30, interval=0.05):
                raise RuntimeError(f"{name} is not listening on 127.0.0.1:{port} after 30 s:\n{self.tail()}")
        except Exception:
            self.stop()
            raise

    def _ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with status {self.proc.returncode}:\n{self.tail()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def tail(self, n=2000):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def find_tools(run):
    """The proxy, the key tool and PgBouncer, or a clear error."""
    inst = run.installs["pgcipher"]
    proxy = getattr(inst, "proxy", None) or os.path.join(
        os.path.dirname(inst.prefix), "bin", "pgcipher-proxy"
    )
    keys = getattr(inst, "keys_tool", None) or os.path.join(
        os.path.dirname(inst.prefix), "bin", "pgcipher-keys"
    )
    bouncer = getattr(inst, "pgbouncer", None) or shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    for path, what in (
        (proxy, "pgcipher-proxy not found at {} (./pgcipher build builds it; or pass --proxy)"),
        (keys, "pgcipher-keys not found at {} (./pgcipher build builds it; or pass --keys-tool)"),
        (
            bouncer,
            "pgbouncer not found at {} (install the Debian package pgbouncer: "
            "sudo ./pgcipher deps; or pass --pgbouncer)",
        ),
    ):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise RuntimeError(what.format(path))
    return proxy, keys, bouncer


def proxy_args(proxy, c, port, cmk, record=None, pprof=None, extra=()):
    args = [
        proxy,
        "--listen",
        f"127.0.0.1:{port}",
        "--upstream",
        f"host={c.dir} port={c.port}",
        "--cmk-file",
        cmk,
        "--cmk-name",
        "bench",
    ]
    return (
        args
        + (["--record", record] if record else [])
        + (["--pprof", f"127.0.0.1:{pprof}"] if pprof else [])
        + list(extra)
    )


def pgbouncer_ini(c, port, directory, pool_size, mode="session", max_client=None):
    """A PgBouncer configuration: session (or mode) pooling, trust (the user
    must be in the auth file), TCP on 127.0.0.1 only, the server over its
    socket."""
    users = os.path.join(directory, "userlist.txt")
    with open(users, "w") as f:
        f.write('"postgres" ""\n')
    ini = os.path.join(directory, "pgbouncer.ini")
    with open(ini, "w") as f:
        f.write(f"""[databases]
postgres = host={c.dir} port={c.port} dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = {mode}
default_pool_size = {pool_size}
max_client_conn = {max_client or pool_size + 50}
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
stats_period = 3600
pidfile = {os.path.join(directory, "pgbouncer.pid")}
""")
    return ini


def start_pgbouncer(bouncer, c, tag, pool_size, mode="session", max_client=None):
    d = os.path.join(c.dir, f"pgbouncer-{tag}")
    os.makedirs(d, exist_ok=True)
    port = free_port()
    ini = pgbouncer_ini(c, port, d, pool_size, mode, max_client)
    return Daemon(f"pgbouncer ({tag})", [bouncer, ini], port, os.path.join(d, "pgbouncer.log"))


def new_cmk(keys_bin, c):
    """pgcipher_columns in cluster c and a new column master key in its
    directory (cmk.hex), made by pgcipher-keys; returns the key file."""
    c.psql("CREATE EXTENSION pgcipher_columns")
    cmk = os.path.join(c.dir, "cmk.hex")
    r = subprocess.run([keys_bin, "new-cmk"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pgcipher-keys new-cmk failed: {r.stderr.strip()}")
    with open(cmk, "w") as f:
        f.write(r.stdout)
    return cmk


def start_proxy(proxy, c, tag, cmk, record=None, pprof=None, extra=()):
    port = free_port()
    return Daemon(
        f"pgcipher-proxy ({tag})",
        proxy_args(proxy, c, port, cmk, record, pprof, extra),
        port,
        os.path.join(c.dir, f"proxy-{tag}.log"),
    )


# ---------------------------------------------------------------- clients


def idle_connection(port, user="postgres", db="postgres"):
    """A client connection through the startup and authentication (trust)
    to its first ReadyForQuery, then left idle: a socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    body = struct.pack("!I", 196608) + b"user\0" + user.encode() + b"\0database\0" + db.encode() + b"\0\0"
    s.sendall(struct.pack("!I", len(body) + 4) + body)
    while True:
        head = _recv_exact(s, 5)
        payload = _recv_exact(s, struct.unpack("!I", head[1:])[0] - 4)
        kind = head[:1]
        if kind == b"E":
            s.close()
            raise RuntimeError(f"connection to port {port} refused: {payload!r}")
        if kind == b"R" and struct.unpack("!I", payload[:4])[0] != 0:
            s.close()
            raise RuntimeError(f"port {port} asks for a password; the bench cluster uses trust")
        if kind == b"Z":
            return s


def close_connection(s):
    try:
        s.sendall(b"X\0\0\0\4")
    except OSError:
        pass
    s.close()


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed during startup")
        buf += chunk
    return buf


class CountingRelay:
    """A TCP relay from 127.0.0.1:port to target_port that counts the bytes
    of each direction (up: client to target; down: back)."""

    def __init__(self, target_port):
        self.target = target_port
        self.up = self.down = 0
        self.active = 0
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.active += 1
            pending = [2]
            threading.Thread(
                target=self._pump, args=(client, server, "up", pending, client, server), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, "down", pending, client, server), daemon=True
            ).start()

    def _pump(self, src, dst, direction, pending, *both):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self.lock:
                    setattr(self, direction, getattr(self, direction) + len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            with self.lock:
                pending[0] -= 1
                last = pending[0] == 0
                if last:
                    self.active -= 1
            if last:
                for sock in both:
                    sock.close()

    def counts(self):
        if not wait_for(lambda: self.active == 0, timeout=10, interval=0.02):
            raise RuntimeError("counting relay: connections still open 10 s after pgbench ended")
        with self.lock:
            return self.up, self.down

    def close(self):
        self.listener.close()


def stable_size(path):
    """The size of a file another process appends to, once it stops growing."""
    last = -1
    for _ in range(100):
        size = os.path.getsize(path)
        if size == last:
            return size
        last = size
        time.sleep(0.05)
    return last


def pgbench(run, c, port, args, timeout):
    """pgbench over TCP on 127.0.0.1; returns (metrics, command line)."""
    cmd = [c.install.bin("pgbench"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args, "postgres"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"pgbench failed (rc {r.returncode}): {' '.join(cmd)}\n{r.stderr.strip()[-1500:]}")
    cmdline = " ".join(cmd).replace(c.dir, "$CLUSTER")
    run.command(cmdline)
    return parse_pgbench(r.stdout), cmdline


def psql_tcp(c, port, sql, timeout=3600):
    r = subprocess.run(
        [
            c.install.bin("psql"),
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if r.returncode != 0:
        raise RuntimeError(f"psql through port {port} failed: {r.stderr.strip()}\nSQL: {sql[:300]}")
    return r.stdout.strip()
