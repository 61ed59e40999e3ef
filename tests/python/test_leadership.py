"""Standby controllers through the Python package (docs/operations.md): on a
`pikv cluster --controllers 2` the admin and an engine's client find the
leader by etcd://, and keep working across a SIGKILL of the leader."""

import os
import shutil
import signal
import time

import pytest

import pikv

from conftest import CONFIGS, Cluster

pytestmark = pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd is not installed")


@pytest.fixture(scope="module")
def ha_cluster():
    c = Cluster(nodes=2, controllers=2)
    yield c
    c.stop()


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = predicate()
            if value:
                return value
        except pikv.Error:  # no leader answering yet
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_admin_and_client_follow_the_leader_across_a_kill(ha_cluster):
    import pikv
    assert ha_cluster.controller.startswith("etcd://")
    assert len(ha_cluster.controllers) == 2
    admin = ha_cluster.admin()
    health = wait_for(lambda: (lambda h: h if h["nodes_alive"] == 2 and h["standbys"] else None)(
        admin.health()), 10, "two nodes alive and a standby")
    assert health["role"] == "leader"
    assert health["standbys"] and health["leader"] not in health["standbys"]
    old_leader, old_epoch = health["leader"], int(health["epoch"])

    client = pikv.Client(pikv.Options.load("", {
        "model-config": os.path.join(CONFIGS, "llama-3.1-8b.json"), "model-id": "m",
        "local-node": "", "controller": ha_cluster.controller, "controller-timeout": "1s",
        "locate-budget": "1s",  # a plan waits for the client's first dial, as long as it takes
        **ha_cluster.security_settings("engine")}))
    segments = [[1, 2, 3], [4, 5, 6], [7]]
    assert client.plan(segments).controller_answered

    connection = admin.connection  # one controller connection for every call, kept
    assert connection.endpoint == old_leader

    victim = next(c["pid"] for c in ha_cluster.controllers if c["endpoint"] == old_leader)
    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    health = wait_for(lambda: (lambda h: h if h["leader"] != old_leader and h["nodes_alive"] == 2
                               else None)(admin.health()), 20, "a new leader with both nodes")
    print(f"new leader {health['leader']} with both nodes after {time.monotonic() - t0:.2f} s")
    # The same connection found the new leader (its finder kept, not rebuilt per call).
    assert admin.connection is connection and connection.endpoint == health["leader"]
    assert int(health["epoch"]) > old_epoch
    assert health["role"] == "leader"
    # The engine's client locates through the new leader (a locate that went
    # unanswered during the failover makes it skip the controller for 1 s,
    # then 2 s, ...).
    assert wait_for(lambda: client.plan(segments).controller_answered, 10, "the client's locate")
