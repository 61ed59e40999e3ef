"""Fixtures for the Python tests: a real local cluster (a controller, two
pikv-nodes, Redis) started with `pikv cluster`, and the paths the tests need.
CTest runs these with PYTHONPATH = the build tree's python/ plus this
directory and the vLLM stand-in, and PIKV_BIN_DIR = the build's bin/; and
runs them twice, with security on (the default) and with
PIKV_TEST_SECURITY=off."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
CONFIGS = os.path.join(SOURCE_DIR, "tests", "device", "model_configs")
sys.path[:0] = [HERE, os.path.join(HERE, "vllm_standin")]


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (CTest label gpu); skipped "
                                       "with a message where there is none")


def bin_dir():
    return os.environ.get("PIKV_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))


def Cluster(nodes=2, controllers=1):
    """A real local cluster from the build tree's `pikv cluster` (with
    controllers > 1: standbys on a local etcd cluster)."""
    from pikv.local_cluster import LocalCluster
    secure = os.environ.get("PIKV_TEST_SECURITY", "on") != "off"
    return LocalCluster(os.path.join(bin_dir(), "pikv"), nodes=nodes, secure=secure,
                        controllers=controllers)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(nodes=2)
    yield c
    c.stop()
