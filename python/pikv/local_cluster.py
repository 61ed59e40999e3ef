"""A local pikv cluster for demos, tests and benchmarks: `pikv cluster` (a
controller, N nodes, optionally Redis; with controllers > 1, standbys elected
on a local etcd cluster, and `controller` is then an etcd:// spec) in the
foreground, its processes read from what it prints (`--json`: pid,
endpoints and data dir of each); stop() sends Ctrl-C and
it stops everything it started.
Secure by default (CURVE with keys made for the cluster, in key_dir):
security_settings() are the client settings a member's keys need."""

import collections
import json
import os
import signal
import subprocess
import threading
import time

from pikv.errors import Unavailable


class LocalCluster:
    def __init__(self, pikv_binary="pikv", nodes=2, redis="auto", timeout=30.0, secure=True,
                 cpu_capacity="256MiB", controllers=1):
        args = [pikv_binary, "cluster", "--json", "--nodes", str(nodes), "--redis", redis,
                "--cpu-capacity", cpu_capacity, "--controllers", str(controllers)]
        self.proc = subprocess.Popen(args + ([] if secure else ["--insecure"]),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._log, self.logged_bytes = collections.deque(maxlen=1000), 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("{") and self._took(line):
                # The daemons log to this pipe for as long as they run: it is
                # read to the end, or a full pipe would stall any thread that
                # logs (a node's reporter among them).
                self._drainer = threading.Thread(target=self._drain, daemon=True)
                self._drainer.start()
                return
            self._log.append(line)
        self.stop()
        raise Unavailable(f"pikv cluster did not come up: {self.log_tail()[-2000:]}")

    def _took(self, line):
        """Whether `line` was `pikv cluster --json`'s document (and is taken);
        anything else (a daemon's log line) is kept as log."""
        try:
            self._take(json.loads(line))
            return True
        except (ValueError, KeyError, TypeError):
            self._log.append(line)
            return False

    def _take(self, doc):
        """`pikv cluster --json`'s document: every process, with its pid."""
        self.processes = doc["processes"]
        of = lambda role: [p for p in self.processes if p["role"] == role]  # noqa: E731
        # With standbys: controller is etcd://...; each member's endpoint and pid.
        self.controller, self.controllers = doc["controller"], of("controller")
        self.nodes = of("node")  # tcp, ipc, http, id, pid, data_dir
        self.redis = doc["redis"] or None
        self.key_dir = doc["key_dir"] or None

    def security_settings(self, member="engine") -> dict:
        """Client settings for `member` (engine, admin, node-<id>): its key
        pair and the keyring; empty when the cluster runs without security."""
        if not self.key_dir:
            return {}
        return {"curve-key": os.path.join(self.key_dir, member),
                "curve-keyring": os.path.join(self.key_dir, "keyring")}

    def admin(self, member="admin"):
        """An Admin of this cluster's controller, with `member`'s keys."""
        from pikv.admin import Admin
        s = self.security_settings(member)
        return Admin(self.controller, curve_key=s.get("curve-key", ""),
                     curve_keyring=s.get("curve-keyring", ""))

    def _drain(self):
        for line in self.proc.stdout:
            self._log.append(line)
            self.logged_bytes += len(line)

    def log_tail(self) -> str:
        """The last lines the cluster's daemons logged (kept in memory)."""
        return "".join(list(self._log))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

