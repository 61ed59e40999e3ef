"""What bench/peers' workloads share: starting and stopping servers (pinned,
dying with the driver), two hosts in network namespaces, a system's clients
run together and their results merged, and the tables."""
import ctypes
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time

MiB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of a whole process (every thread) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


_prctl = ctypes.CDLL(None).prctl  # resolved here: not in a forked child


def die_with_parent():
    """preexec_fn: the child is SIGKILLed when this process dies, however it
    dies (PR_SET_PDEATHSIG; kept across exec, so through taskset and
    nsenter too)."""
    _prctl(1, signal.SIGKILL)


def quantile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def parse_size(text):
    units = {"kib": 1 << 10, "mib": MiB, "gib": 1 << 30}
    t = text.strip().lower()
    for suffix, mult in units.items():
        if t.endswith(suffix):
            return int(float(t[:-len(suffix)]) * mult)
    return int(t)


def size_name(size):
    return f"{size // MiB}mib" if size >= MiB else f"{size >> 10}kib"


class Server:
    """A started process, pinned, stopped on close (or by stop_all)."""
    running = []

    def __init__(self, argv, cpus, log, ready=None, env=None, timeout=30, prefix=(),
                 stdin=False):
        """Waits for a line containing `ready` on its stdout (when given); its
        output, that line's too, goes on into `log` from a thread. `prefix`
        runs it elsewhere (Hosts.prefix: in a network namespace). `stdin`:
        it is driven through its stdin (proc.stdin) and its stdout lines
        are kept for next_line too."""
        self.log = log
        self.log_file = log_file = open(log, "w")
        self.proc = subprocess.Popen(list(prefix) + ["taskset", "-c", cpus] + argv,
                                     stdin=subprocess.PIPE if stdin else None,
                                     stdout=subprocess.PIPE, stderr=log_file, text=True, env=env,
                                     start_new_session=True, preexec_fn=die_with_parent)
        Server.running.append(self)
        seen = threading.Event()
        self.lines = queue.Queue() if stdin else None

        said_ready = False

        def drain():  # a server never blocks on a full pipe
            nonlocal said_ready
            for line in self.proc.stdout:
                log_file.write(line)
                if self.lines:
                    self.lines.put(line)
                if ready and ready in line:
                    said_ready = True
                    seen.set()
            seen.set()  # it ended: no one waits out the timeout for it
        self.drain = threading.Thread(target=drain, daemon=True)
        self.drain.start()
        if ready and not (seen.wait(timeout) and said_ready):
            how = "before it ended" if seen.is_set() else f"in {timeout} s"
            raise RuntimeError(f"{argv[0]} did not say '{ready}' {how}; see {log}")

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def next_line(self, timeout):
        """The next line it prints that is a JSON object (stdin=True)."""
        deadline = time.time() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.time()))
            except queue.Empty:
                raise RuntimeError(f"no result from {self.log} in {timeout} s") from None
            if line.startswith("{"):
                return line

    @staticmethod
    def stop_all():
        for server in reversed(Server.running):
            try:
                server.close()
            except Exception as e:  # the others are still stopped
                print(f"stopping {server.log}: {e}", file=sys.stderr)
        Server.running.clear()

    def close(self):
        """SIGTERM to its session (what it started goes too), SIGKILL after
        10 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.drain.join(5)  # its stdout ends with it
        self.log_file.close()


def wait_port(port, timeout=30, host="127.0.0.1", prefix=()):
    """Until something listens on host:port (seen from `prefix`'s namespace)."""
    deadline = time.time() + timeout
    probe = list(prefix) + ["bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"]
    while time.time() < deadline:
        if prefix:
            if subprocess.run(probe, stderr=subprocess.DEVNULL).returncode == 0:
                return
        else:
            with socket.socket() as s:
                if s.connect_ex((host, port)) == 0:
                    return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port}")


class Hosts:
    """Two hosts on one machine: network namespaces joined by a veth pair,
    10.214.0.1 (host a) and 10.214.0.2 (host b). Each namespace is held by a
    child (unshare --net sleep) killed with this process (PDEATHSIG), and
    the link goes with them, so nothing outlives a run. Needs root."""
    ADDRESS = ("10.214.0.1", "10.214.0.2")

    def __init__(self):
        self.holders = [subprocess.Popen(["unshare", "--net", "sleep", "infinity"],
                                         preexec_fn=die_with_parent) for _ in range(2)]
        own = os.readlink("/proc/self/ns/net")
        for h in self.holders:
            for _ in range(200):
                if os.path.exists(f"/proc/{h.pid}/ns/net") and \
                        os.readlink(f"/proc/{h.pid}/ns/net") != own:
                    break
                time.sleep(0.01)
        link = f"pkp{os.getpid() % 100000}"
        steps = [["ip", "link", "add", link + "a", "type", "veth", "peer", "name", link + "b"]]
        for i, side in enumerate("ab"):
            steps.append(["ip", "link", "set", link + side, "netns", str(self.holders[i].pid)])
        for i, side in enumerate("ab"):
            steps += [self.prefix(i) + ["ip", "addr", "add", self.ADDRESS[i] + "/24", "dev",
                                        link + side],
                      self.prefix(i) + ["ip", "link", "set", link + side, "up"],
                      self.prefix(i) + ["ip", "link", "set", "lo", "up"]]
        try:
            for step in steps:
                subprocess.run(step, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        except Exception:
            self.close()
            raise

    def prefix(self, host):
        return ["nsenter", f"--net=/proc/{self.holders[host].pid}/ns/net"]

    def close(self):
        for h in self.holders:
            h.kill()
            h.wait()


class System:
    """One system under test: its servers, and how to start one client."""

    def __init__(self, name, servers, client_argv, env=None):
        self.name = name
        self.servers = servers
        self.env = env  # the clients' environment (None: this one)
        # (op, size, objects, first, batch, seconds, seed) -> argv
        self.client_argv = client_argv
        self.flush = lambda: None  # empties the store before a get set is loaded
        self.prefix = []  # where its clients run (Hosts.prefix)
        self.puts = True  # False: its puts are another system's (measured there)
        self.disjoint_gets = False  # its get clients each read objects of their own

    def server_cpu(self):
        return sum(s.cpu() for s in self.servers)


def data_client(args, system, endpoint, extra=(), bin_dir=None):
    """argv of peer_data_client for `system` (pikv, pikv-pull, redis), from
    `bin_dir` (default: --bin-dir)."""
    return lambda op, size, objects, first, batch, seconds, seed: [
        f"{bin_dir or args.bin_dir}/peer_data_client", "--system", system, "--endpoint", endpoint, "--op",
        op, "--size", str(size), "--objects", str(objects), "--first", str(first), "--batch",
        str(batch), "--seconds", str(seconds), "--seed", str(seed), "--sync", *extra]


def python_data_client(prefix, extra=()):
    """argv of a Python data-plane client (mooncake_client.py,
    lmcache_data_client.py) started by `prefix`: peer_data_client's flags."""
    return lambda op, size, objects, first, batch, seconds, seed: list(prefix) + [
        "--op", op, "--size", str(size), "--objects", str(objects), "--first", str(first),
        "--batch", str(batch), "--seconds", str(seconds), "--seed", str(seed), "--sync",
        *extra]


def wait_ready(proc, name, timeout=600):
    """Until `proc` says "ready" on stdout; raises when it says anything else,
    exits, or is silent for `timeout` s."""
    if not select.select([proc.stdout], [], [], timeout)[0]:
        raise RuntimeError(f"{name} client did not set up in {timeout} s")
    line = proc.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"{name} client did not start ({line!r})")


def run_clients(args, system, op, size, objects, batch, clients, seconds, seed=0):
    """One timed run of `clients` processes; the merged result. No client
    outlives it, whatever happens."""
    procs = []
    try:
        for c in range(clients):
            argv = system.client_argv(op, size, objects, c * objects // max(clients, 1), batch,
                                      seconds, seed)
            if system.disjoint_gets and op == "get":
                argv += ["--slice", str(max(1, objects // clients))]
            procs.append(subprocess.Popen(
                system.prefix + ["taskset", "-c", args.client_cpus] + argv, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=system.env,
                preexec_fn=die_with_parent))
        for p in procs:  # every client set up (objects made, connected)
            wait_ready(p, system.name)
        server_cpu = system.server_cpu()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=seconds * 10 + 600)
            last = out.strip().splitlines()[-1] if out.strip() else "{}"
            results.append(json.loads(last) if last.startswith("{") else {})
        server_cpu = system.server_cpu() - server_cpu
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    merged = {"ok": 0, "failed": 0, "bytes": 0, "seconds": 0.0, "cpu": server_cpu,
              "server_cpu": server_cpu, "latencies_us": []}
    for r in results:
        if not r:
            merged["failed"] += 1
            continue
        merged["ok"] += r["ok"]
        merged["failed"] += r["failed"]
        merged["bytes"] += r["bytes"]
        merged["seconds"] = max(merged["seconds"], r["seconds"])
        merged["cpu"] += r["cpu_seconds"]
        merged["latencies_us"] += r["latencies_us"]
    return merged


def print_table(table):
    """Rows of strings; the first is the header. Figures (from column
    `first_figure` on) are right-aligned."""
    header, first_figure = table[0]
    widths = [max(len(row[i]) for row in [header] + table[1:]) for i in range(len(header))]
    for i, row in enumerate([header] + table[1:]):
        print("  ".join(c.rjust(w) if j >= first_figure else c.ljust(w)
                        for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()


