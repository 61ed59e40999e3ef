"""A local pikv cluster for demos, tests and benchmarks: `pikv cluster` (a
controller, N nodes, optionally Redis) in the foreground, its endpoints read
from what it prints; stop() sends Ctrl-C and it stops everything it started."""

import re
import signal
import subprocess
import time


class LocalCluster:
    def __init__(self, pikv_binary="pikv", nodes=2, redis="auto", timeout=30.0):
        self.proc = subprocess.Popen([pikv_binary, "cluster", "--nodes", str(nodes), "--redis",
                                      redis], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.nodes, self.controller, self.redis = [], None, None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("controller "):
                self.controller = line.split()[1]
            elif line.startswith("node "):
                tcp, ipc = re.findall(r"(tcp://\S+|ipc://\S+)", line)[:2]
                self.nodes.append({"tcp": tcp, "ipc": ipc})
            elif line.startswith("redis "):
                self.redis = line.split()[1]
            elif line.startswith("Ctrl-C"):
                return
        self.stop()
        raise RuntimeError("pikv cluster did not come up")

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

