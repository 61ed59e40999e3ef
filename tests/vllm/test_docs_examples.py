"""docs/vllm.md's quick start, run as written: the offline vllm.LLM
program, and the server command with its client, on SmolLM2's real weights
and a secure pikv cluster whose settings reach the connector through the
PIKV_* variables the docs export."""

import ast
import os
import re
import signal
import subprocess
import sys

from conftest import SOURCE_DIR, node_chunks
from test_vllm_serve import free_port, wait_for_metrics, wait_healthy

EXAMPLE_TIMEOUT_S = 600


def examples():
    """{name: code} of docs/vllm.md's blocks that start `# docs-example: name`."""
    with open(os.path.join(SOURCE_DIR, "docs", "vllm.md")) as f:
        text = f.read()
    found = re.findall(r"```(?:python|bash)\n# docs-example: (\w+)\n(.*?)```", text, re.S)
    return {name: code for name, code in found}


def example_env(cluster, node, model, **more):
    """What the quick start exports, for an engine on `node` (0-based)."""
    keys = cluster.security_settings("engine")
    return dict(os.environ, **{
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "MODEL": model, "PIKV_LOCAL_NODE": cluster.nodes[node]["ipc"],
        "PIKV_CONTROLLER": cluster.controller, "PIKV_CURVE_KEY": keys["curve-key"],
        "PIKV_CURVE_KEYRING": keys["curve-keyring"], "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": str(os.cpu_count() or 1),
        # The model runs eager, as in the other tests' enforce_eager: vLLM's
        # compile is no part of the connector's path and costs each example
        # about 2 of its 3.5 minutes on 2 cores, cache or not.
        "TORCHDYNAMO_DISABLE": "1", "VLLM_USE_AOT_COMPILE": "0",
        "PYTHONUNBUFFERED": "1"}, **more)


def test_the_docs_examples_are_the_ones_tested():
    assert sorted(examples()) == ["client", "offline", "serve"]


def test_the_offline_example_loads_every_document_from_pikv(cluster, real_model, tmp_path):
    program = tmp_path / "offline.py"
    program.write_text(examples()["offline"])
    run = subprocess.run([sys.executable, str(program)], env=example_env(cluster, 0, real_model),
                         capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    m = re.search(r"(\d+) of (\d+) prompt tokens loaded from pikv", run.stdout)
    assert m, run.stdout
    loaded, total = int(m.group(1)), int(m.group(2))
    assert 0 < loaded and total - loaded <= 32, (loaded, total)  # all but the question


def test_the_server_example_answers_its_client_from_pikv(cluster, real_model, tmp_path):
    """The second client request loads what the first stored (on node 2:
    any chunk the offline example left on node 1 is pulled P2P)."""
    port = free_port()
    env = example_env(cluster, 1, real_model, PORT=str(port))
    log = str(tmp_path / "serve.log")
    server = subprocess.Popen(["bash", "-c", examples()["serve"]], env=env,
                              stdout=open(log, "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        wait_healthy(server, port, log)
        client = tmp_path / "client.py"
        client.write_text(examples()["client"])
        answers, after = [], []
        for n in (1, 2):
            run = subprocess.run([sys.executable, str(client)], env=env, capture_output=True,
                                 text=True, timeout=EXAMPLE_TIMEOUT_S)
            assert run.returncode == 0, run.stderr[-4000:]
            answers.append(run.stdout)
            # The scheduler's counters of a request arrive together; the
            # worker's loaded tokens catch up with what it planned.
            after.append(wait_for_metrics(port, lambda m, n=n: m.get("lookups") == n and
                                          m.get("loaded_tokens", 0) == m.get("matched_tokens")))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert all(a.strip() for a in answers), answers
    # The second request loads the system prompt and the document, whatever
    # the first found (the offline example may have stored them already).
    prefix = len(client_segments(real_model)[0]) + len(client_segments(real_model)[1])
    second = after[1]["matched_tokens"] - after[0].get("matched_tokens", 0)
    assert second == prefix, after
    assert after[1]["loaded_tokens"] == after[1]["matched_tokens"], after
    assert node_chunks(cluster, 1) >= 2  # the system prompt and the document


def client_segments(model):
    """The client example's segments, tokenized as it does."""
    from transformers import AutoTokenizer
    code = examples()["client"]
    texts = ast.literal_eval(re.search(r"^texts = (\[.*?\])$", code, re.S | re.M).group(1))
    tokenizer = AutoTokenizer.from_pretrained(model)
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]
