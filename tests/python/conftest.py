"""Fixtures for the Python tests: a real local cluster (a controller, two
pikv-nodes, Redis) started with `pikv cluster`, and the paths the tests need.
CTest runs these with PYTHONPATH = the build tree's python/ plus this
directory and the vLLM stand-in, and PIKV_BIN_DIR = the build's bin/."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
CONFIGS = os.path.join(SOURCE_DIR, "tests", "device", "model_configs")
sys.path[:0] = [HERE, os.path.join(HERE, "vllm_standin")]


def bin_dir():
    return os.environ.get("PIKV_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))


class Cluster:
    """`pikv cluster --nodes N` in the foreground; endpoints read from what it prints."""

    def __init__(self, nodes=2):
        self.proc = subprocess.Popen([os.path.join(bin_dir(), "pikv"), "cluster", "--nodes",
                                      str(nodes)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.nodes, self.controller, self.redis = [], None, None
        deadline = time.monotonic() + 30
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


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(nodes=2)
    yield c
    c.stop()
