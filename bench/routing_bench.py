#!/usr/bin/env python3
"""What routing is worth in front of vLLM servers attached to pikv: the
same RAG request stream through pikv.router in each mode (round-robin,
prefix-only scoring, chunk-set scoring), interleaved, each phase on
emptied nodes. Run with the vLLM virtualenv (scripts/install-deps.sh vllm):

  .venv-vllm/bin/python bench/routing_bench.py [--layers 4] [--requests 60] [--rate 1.0]
        [--rounds 1] [--docs 40] [--per-prompt 4] [--settings p2p,no-p2p]

One host: a secure 2-node `pikv cluster` (no Redis), two vLLM OpenAI
servers (the server module `vllm serve` runs), one per node with the
connector attached to it, each vLLM engine bound to a core of its own
(VLLM_CPU_OMP_THREADS_BIND=0 and 1, OMP_NUM_THREADS=1), and one router per
mode in front of both. The model is SmolLM2-135M-Instruct's real weights
(scripts/real-model.py) cut to its first --layers layers, with its own
tokenizer and chat template: small enough that a phase takes about a
minute, big enough that prefill is most of a cold request's TTFT.

The workload: one system prompt; a pool of --docs documents (random token
ids, --doc-tokens long) drawn Zipf(--zipf) by popularity, --per-prompt
distinct ones per request in a new random order, then a new question;
segments named in the body (kv_transfer_params pikv_segments). Arrivals
are open-loop Poisson at --rate per second; every mode gets the same
seeded requests at the same times. Nothing is precomputed: as in a plain
vLLM deployment, the connector stores what requests compute in the reuse
mode's form (prefixed: the system prompt, and a document computed right
after it), so a document is learned where it first came first.

TTFT is measured at the client: from sending the request to the first
SSE data line of a streaming completion. A request that fails (a status
other than 200, an error event, a stream cut short) is counted and never
timed. Per phase, from each server's own /metrics: prompt tokens, those
vLLM computed (prompt_tokens_by_source local_compute) and those pikv
loaded (vllm:pikv_loaded_tokens_total); from each node's /metrics the
bytes it pulled from its peer (pikv_node_p2p_pulled_bytes_total); from
the router, where it sent the requests.

Settings (--settings): `p2p`, the connector as deployed (any node pulls
any chunk from its peer); `no-p2p`, the same servers restarted with the
connector's `controller` empty (local-only plans: a node uses only what
it holds itself) and the routers told a peer's chunk is worth nothing
(--credit peer=0): what locality alone is worth.

Before the phases the router's forwarding of real vLLM answers is
checked against the same requests sent to a server directly: completions
and chat completions, streaming and not, unchunked and with segments
(which the router tokenizes through the server's /tokenize and scores);
greedy, so both answer the same tokens. After the first scored phase, the
routers' chunk keys are checked against the connectors' (/score finds a
served prompt's system prompt). The table follows, then one JSON line;
--keep keeps the logs and results.json, which --report prints again.
"""

import argparse
import http.client
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODES = ("round-robin", "prefix", "chunks")
SETTINGS = ("p2p", "no-p2p")
COMPUTED = "vllm:prompt_tokens_by_source_total:local_compute"  # vLLM's own count


# --- processes ---------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def post_json(url, body, timeout=300):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def make_model(layers, work):
    """SmolLM2-135M-Instruct (real weights, its tokenizer) cut to `layers`."""
    from safetensors.torch import load_file, save_file
    full = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "real-model.py")],
                          check=True, capture_output=True, text=True).stdout.split()[-1]
    if not layers:
        return full
    out = os.path.join(work, f"smollm2-135m-{layers}-layers")
    os.makedirs(out)
    weights = load_file(os.path.join(full, "model.safetensors"))
    save_file({k: v for k, v in weights.items()
               if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers},
              os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(full, "config.json")) as f:
        config = json.load(f)
    config["num_hidden_layers"] = layers
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    for name in os.listdir(full):
        if name not in ("model.safetensors", "config.json") and not name.startswith("."):
            shutil.copy(os.path.join(full, name), out)
    return out


class Server:
    """A vLLM OpenAI server on one node, its engine bound to `core`."""

    def __init__(self, args, model, cluster, node, core, p2p, work, tag):
        from run_engine import connector_config
        self.port, self.node = free_port(), cluster.nodes[node]["id"]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = os.path.join(work, f"vllm-{tag}-{self.node}.log")
        settings = dict(cluster.security_settings("engine"), **{
            "local-node": cluster.nodes[node]["ipc"],
            # Empty: local-only plans (no locate, no P2P); the node still
            # reports what it holds, so the routers' /score sees it.
            "controller": cluster.controller if p2p else "",
            "locate-budget": "200ms"})
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND=str(core),
                   OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            ["nice", sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
             "--port", str(self.port), "--host", "127.0.0.1", "--dtype", "float32",
             "--enforce-eager", "--no-enable-prefix-caching", "--max-model-len",
             str(args.max_model_len), "--kv-transfer-config",
             json.dumps(connector_config(settings))],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env,
            start_new_session=True)

    def wait(self, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"vLLM on {self.node} exited {self.proc.returncode}:\n"
                                 f"{open(self.log).read()[-4000:]}")
            try:
                get(self.url + "/health", timeout=2)
                return
            except OSError:
                time.sleep(1)
        raise SystemExit(f"vLLM on {self.node} did not come up in {timeout} s")

    def metrics(self):
        """{name or name{source}: value} of the counters the bench reads."""
        out = {}
        for line in get(self.url + "/metrics").splitlines():
            m = re.match(r'(vllm:[a-z_]+_total)(\{[^}]*\})? (\S+)$', line)
            if not m:
                continue
            source = re.search(r'source="(\w+)"', m.group(2) or "")
            name = m.group(1) + (f":{source.group(1)}" if source else "")
            out[name] = out.get(name, 0.0) + float(m.group(3))
        return out

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class Router:
    """python -m pikv.router in one mode in front of `servers`."""

    def __init__(self, mode, servers, controller_http, model, args, p2p, work, tag):
        self.mode = mode
        self.log = os.path.join(work, f"router-{tag}-{mode}.log")
        cmd = [sys.executable, "-m", "pikv.router", "--listen", "127.0.0.1:0", "--mode", mode,
               "--controller-http", controller_http,
               "--client-setting", f"model-id={model}",
               "--client-setting", f"model-config={os.path.join(model, 'config.json')}",
               "--client-setting", "dtype=f32",
               "--client-setting", f"max-model-len={args.max_model_len}"]
        if not p2p:  # what an operator tells a router whose engines cannot pull
            cmd += ["--credit", "peer=0"]
        for s in servers:
            cmd += ["--backend", f"{s.url}={s.node}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(self.log, "w"),
                                     text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"pikv-router ready (\S+):(\d+)", line)
        if not m:
            raise SystemExit(f"router {mode} did not start: {line!r}\n"
                             f"{open(self.log).read()[-3000:]}")
        self.url = f"http://127.0.0.1:{m.group(2)}"

    def stats(self):
        return json.loads(get(self.url + "/router/stats"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def node_pulled_bytes(cluster):
    """{node id: pikv_node_p2p_pulled_bytes_total}, from each node's /metrics."""
    out = {}
    for n in cluster.nodes:
        text = get(f"http://{n['http']}/metrics")
        m = re.search(r"^pikv_node_p2p_pulled_bytes_total(?:\{[^}]*\})? (\S+)$", text, re.M)
        out[n["id"]] = float(m.group(1)) if m else 0.0
    return out


def keys_found(controller_http, model, args, segments):
    """Whether the router's chunk keys (its key client, built from the
    --client-setting flags the routers get) name what the connectors stored:
    /score for `segments` (a prompt just served) finds its system prompt on
    a node's own tiers. A router keyed otherwise sees every chunk missing
    and routes by load alone."""
    from pikv.prompt import chunk_keys
    from pikv.router import key_client
    keys = chunk_keys(key_client("", {"model-id": model,
                                      "model-config": os.path.join(model, "config.json"),
                                      "dtype": "f32", "max-model-len": str(args.max_model_len)},
                                 ""), segments)
    reply = json.loads(get(f"http://{controller_http}/score?key={','.join(keys)}&tokens=" +
                           ",".join(str(len(s)) for s in segments[:-1])))
    return any(n["tokens"]["cpu"] + n["tokens"]["disk"] >= len(segments[0])
               for n in reply["nodes"])


def clear_nodes(cluster, timeout=15):
    """Every chunk dropped from both nodes, and the registry empty."""
    admin = cluster.admin()
    admin.clear()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = admin.stats()
        if s["keys"] == 0 and all(n["cpu_chunks"] == 0 and n["disk_chunks"] == 0
                                  for n in s["per_node"]):
            return
        time.sleep(0.3)
    raise SystemExit(f"the nodes were not empty {timeout} s after clear")


# --- the workload --------------------------------------------------------------------


def workload(args, seed):
    """[(arrival s, segments)]: the same for every mode of a round."""
    r = random.Random(seed)
    vocab = (100, 49000)  # SmolLM2's ids, clear of its special tokens

    def seg(n):
        return [r.randrange(*vocab) for _ in range(n)]

    system = seg(args.system_tokens)
    lo, hi = args.doc_tokens
    docs = [seg(r.randint(lo, hi)) for _ in range(args.docs)]
    weights = [1.0 / (rank + 1) ** args.zipf for rank in range(args.docs)]
    out, t = [], 0.0
    for _ in range(args.requests):
        chosen = []
        while len(chosen) < args.per_prompt:  # distinct documents, by popularity
            d = r.choices(range(args.docs), weights)[0]
            if d not in chosen:
                chosen.append(d)
        r.shuffle(chosen)
        out.append((t, [system] + [docs[d] for d in chosen] + [seg(args.question_tokens)]))
        t += r.expovariate(args.rate)
    return out


def stream_ttft(url, body, timeout=600):
    """(TTFT s, None) of one streaming completion, or (None, why it failed)."""
    host, port = url.split("//")[1].split(":")
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return None, f"status {resp.status}: {resp.read()[:200]!r}"
        ttft, done = None, False
        for line in resp:
            if not line.startswith(b"data:"):
                continue
            if ttft is None:
                ttft = time.monotonic() - t0
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            if b'"error"' in data and "error" in json.loads(data):
                return None, f"error event {data[:200]!r}"
        return (ttft, None) if done else (None, "stream ended before [DONE]")
    except (OSError, http.client.HTTPException, ValueError) as e:
        return None, repr(e)
    finally:
        conn.close()


def run_phase(url, model, requests, args):
    """Sends `requests` at their arrival times; [(ttft or None, why, prompt tokens)]."""
    results = [None] * len(requests)

    def one(i, segments):
        body = {"model": model, "prompt": sum(segments, []), "max_tokens": args.max_tokens,
                "temperature": 0, "stream": True, "ignore_eos": True,
                "kv_transfer_params": {"pikv_segments": [len(s) for s in segments]}}
        ttft, why = stream_ttft(url, body)
        results[i] = (ttft, why, len(body["prompt"]))

    threads, start = [], time.monotonic()
    for i, (at, segments) in enumerate(requests):
        time.sleep(max(0.0, start + at - time.monotonic()))
        t = threading.Thread(target=one, args=(i, segments), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return results, time.monotonic() - start


def settled_metrics(servers, before, prompt_tokens, timeout=20):
    """Each server's counters once vLLM has recorded the phase's prompts
    (it records a step's stats after sending its outputs)."""
    deadline = time.monotonic() + timeout
    while True:
        now = [s.metrics() for s in servers]
        seen = sum(n.get("vllm:prompt_tokens_total", 0) - b.get("vllm:prompt_tokens_total", 0)
                   for n, b in zip(now, before))
        if seen >= prompt_tokens or time.monotonic() > deadline:
            return now
        time.sleep(0.3)


def delta(now, before, name):
    return sum(n.get(name, 0.0) - b.get(name, 0.0) for n, b in zip(now, before))


# --- the router against real vLLM answers ----------------------------------------------


def sse_events(url, path, body):
    """The data lines of a streaming answer, and the raw status."""
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        lines = [line.strip() for line in resp if line.startswith(b"data:")]
        return resp.status, lines
    finally:
        conn.close()


def stream_text(lines, chat):
    """The text of a stream's events (through [DONE]); raises if malformed."""
    if not lines or lines[-1] != b"data: [DONE]":
        raise ValueError(f"stream does not end with [DONE]: {lines[-2:]!r}")
    text = ""
    for line in lines[:-1]:
        choice = json.loads(line[5:])["choices"]
        if choice:
            text += (choice[0].get("delta", {}).get("content") or "") if chat else \
                choice[0].get("text", "")
    return text


def check_forwarding(router, server, model):
    """Each kind of request through the router and straight to `server`:
    the same status and the same greedy text. Completions and chat
    completions, streamed and not, unchunked and with pikv_segments (which
    the router tokenizes through the server's /tokenize, chat with its
    template, keys and scores: its counters must show no failed /tokenize
    and no fallback). Returns [(what, ok, detail)]."""
    messages = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "What is the capital of France?"}]
    text = "The capital of France is"
    chat_ids = post_json(server.url + "/tokenize", {"model": model, "messages": messages})["tokens"]
    text_ids = post_json(server.url + "/tokenize", {"model": model, "prompt": text})["tokens"]

    def halves(n):  # [system, question] segments: the system prompt is a chunk
        return {"pikv_segments": [n // 2, n - n // 2]}

    base = {"model": model, "max_tokens": 8, "temperature": 0}
    kinds = [
        ("completions, text", "/v1/completions", dict(base, prompt=text), False),
        ("completions, token ids", "/v1/completions",
         dict(base, prompt=list(range(1000, 1040))), False),
        ("chat completions", "/v1/chat/completions", dict(base, messages=messages), True),
        ("completions, text, segments", "/v1/completions",
         dict(base, prompt=text, kv_transfer_params=halves(len(text_ids))), False),
        ("chat completions, segments", "/v1/chat/completions",
         dict(base, messages=messages, kv_transfer_params=halves(len(chat_ids))), True)]
    out = []

    def same(what, fn):
        try:
            a, b = fn(router.url), fn(server.url)
            out.append((what, a == b, "" if a == b else f"router {a!r} direct {b!r}"))
        except Exception as e:  # noqa: BLE001 - the check reports, the bench goes on
            out.append((what, False, repr(e)))

    def answer(url, path, body, chat):
        reply = post_json(url + path, body)
        return reply["choices"][0]["message"]["content"] if chat else reply["choices"][0]["text"]

    def streamed(url, path, body, chat):
        status, lines = sse_events(url, path, dict(body, stream=True))
        return status, stream_text(lines, chat)

    before = router.stats()
    for what, path, body, chat in kinds:
        same(what, lambda url, p=path, b=body, c=chat: answer(url, p, b, c))
        same(what + ", streamed", lambda url, p=path, b=body, c=chat: streamed(url, p, b, c))
    same("GET /v1/models", lambda url: json.loads(get(url + "/v1/models"))["data"][0]["id"])
    after = router.stats()
    counts = {k: after[k] - before[k] for k in ("tokenize_failures", "score_fallbacks",
                                                "unchunked", "broken_streams", "retries")}
    # Six requests name no segments; the four with segments were scored.
    want = {"tokenize_failures": 0, "score_fallbacks": 0, "unchunked": 6, "broken_streams": 0,
            "retries": 0}
    out.append(("router counters", counts == want, "" if counts == want else f"{counts}"))
    return out


# --- the report ------------------------------------------------------------------------


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def summarize(phases):
    """Per (setting, mode): the phases of every round together."""
    rows = {}
    for p in phases:
        r = rows.setdefault((p["setting"], p["mode"]), {
            "ttft": [], "failures": 0, "prompt_tokens": 0, "computed_tokens": 0,
            "loaded_tokens": 0, "load_failures": 0, "p2p_bytes": 0, "seconds": 0.0,
            "by_node": {}, "score_fallbacks": 0, "why": []})
        r["ttft"] += [t for t in p["ttft"] if t is not None]
        r["failures"] += p["failures"]
        r["why"] += p["why"]
        for k in ("prompt_tokens", "computed_tokens", "loaded_tokens", "load_failures",
                  "p2p_bytes", "seconds", "score_fallbacks"):
            r[k] += p[k]
        for node, n in p["by_node"].items():
            r["by_node"][node] = r["by_node"].get(node, 0) + n
    for r in rows.values():
        r["mean_ttft_s"] = sum(r["ttft"]) / len(r["ttft"]) if r["ttft"] else float("nan")
        r["p50_ttft_s"] = percentile(r["ttft"], 50)
        r["p99_ttft_s"] = percentile(r["ttft"], 99)
        r["computed_share"] = r["computed_tokens"] / max(1, r["prompt_tokens"])
    return rows


def report(args, rows, checks, keys_ok, run_s, model):
    print(f"\nRouting, 2 vLLM CPU servers (1 core each) on 2 pikv nodes; {model} "
          f"(SmolLM2-135M, {args.layers or 30} layers, float32); {args.requests} requests "
          f"x {args.rounds} round(s) per mode at {args.rate}/s Poisson; {args.per_prompt} of "
          f"{args.docs} documents ({args.doc_tokens[0]}-{args.doc_tokens[1]} tokens, "
          f"Zipf {args.zipf}) per prompt in a new order; system {args.system_tokens}, question "
          f"{args.question_tokens} tokens; {args.max_tokens} output tokens")
    head = (f"{'setting':<8}{'mode':<13}{'ok':>5}{'fail':>5}{'mean TTFT s':>12}{'p50':>8}"
            f"{'p99':>8}{'vs RR':>7}{'computed':>10}{'share':>7}{'loaded':>9}{'P2P MiB':>9}"
            f"{'vs RR':>7}  requests per node")
    print(head)
    print("-" * len(head))
    figures = {"layers": args.layers, "requests": args.requests, "rounds": args.rounds,
               "rate": args.rate, "docs": args.docs, "per_prompt": args.per_prompt,
               "zipf": args.zipf, "run_s": round(run_s, 1)}
    for (setting, mode), r in rows.items():
        rr = rows.get((setting, "round-robin"))
        vs = r["mean_ttft_s"] / rr["mean_ttft_s"] if rr and rr["ttft"] else float("nan")
        vs_computed = r["computed_tokens"] / rr["computed_tokens"] if rr and rr[
            "computed_tokens"] else float("nan")
        nodes = " ".join(f"{k}:{v}" for k, v in sorted(r["by_node"].items()))
        print(f"{setting:<8}{mode:<13}{len(r['ttft']):>5}{r['failures']:>5}"
              f"{r['mean_ttft_s']:>12.3f}{r['p50_ttft_s']:>8.3f}{r['p99_ttft_s']:>8.3f}"
              f"{vs:>7.2f}{r['computed_tokens']:>10.0f}{r['computed_share']:>7.2f}"
              f"{r['loaded_tokens']:>9.0f}{r['p2p_bytes'] / 2**20:>9.1f}{vs_computed:>7.2f}  "
              f"{nodes}")
        key = f"{setting}_{mode}".replace("-", "_")
        figures.update({
            f"{key}_mean_ttft_s": round(r["mean_ttft_s"], 4),
            f"{key}_p50_ttft_s": round(r["p50_ttft_s"], 4),
            f"{key}_p99_ttft_s": round(r["p99_ttft_s"], 4),
            f"{key}_mean_ttft_vs_rr": round(vs, 3),
            f"{key}_ok": len(r["ttft"]), f"{key}_failures": r["failures"],
            f"{key}_prompt_tokens": int(r["prompt_tokens"]),
            f"{key}_computed_tokens": int(r["computed_tokens"]),
            f"{key}_computed_vs_rr": round(vs_computed, 3),
            f"{key}_loaded_tokens": int(r["loaded_tokens"]),
            f"{key}_load_failures": int(r["load_failures"]),
            f"{key}_p2p_bytes": int(r["p2p_bytes"]),
            f"{key}_score_fallbacks": r["score_fallbacks"]})
        for why in r["why"][:3]:
            print(f"    failed: {why}")
    print("(computed: prompt tokens vLLM computed, its prompt_tokens_by_source local_compute; "
          "share: of all prompt tokens; loaded: tokens pikv loaded into vLLM's blocks; P2P: "
          "bytes the nodes pulled from each other; vs RR: against round-robin of the same "
          "setting)")
    for setting in SETTINGS:
        rr, px, ch = (rows.get((setting, m)) for m in MODES)
        if rr and ch and rr["ttft"] and ch["ttft"]:
            goal = rr["mean_ttft_s"] / ch["mean_ttft_s"]
            line = (f"{setting}: mean TTFT round-robin / chunk-set scoring {goal:.2f} "
                    "(goal >= 2)")
            key = setting.replace("-", "_")
            if px and px["ttft"]:
                below = px["mean_ttft_s"] / ch["mean_ttft_s"]
                line += f", prefix-only / chunk-set {below:.2f} (goal > 1)"
                figures[f"{key}_prefix_over_chunks_mean_ttft"] = round(below, 3)
            print(line)
            figures[f"{key}_rr_over_chunks_mean_ttft"] = round(goal, 3)
    for setting, ok in keys_ok.items():
        print(f"{setting}: the routers' chunk keys {'equal' if ok else 'DO NOT equal'} the "
              "connectors' (a served prompt's system prompt found by /score)")
        figures[f"{setting.replace('-', '_')}_router_keys_match"] = ok
    if checks:
        print("\nThe router forwarding real vLLM answers (router vs the server directly):")
        for what, ok, detail in checks:
            print(f"  {'ok  ' if ok else 'FAIL'} {what} {detail}")
        figures["forwarding_checks"] = len(checks)
        figures["forwarding_failures"] = sum(not ok for _, ok, _ in checks)
    print(json.dumps(figures))


# --- main --------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4,
                    help="SmolLM2-135M's first N layers (0: all 30)")
    ap.add_argument("--requests", type=int, default=60, help="per phase (mode and round)")
    ap.add_argument("--rate", type=float, default=1.0, help="arrivals per second (Poisson)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of every mode, interleaved, each with its own requests")
    ap.add_argument("--docs", type=int, default=40, help="documents in the pool")
    ap.add_argument("--doc-tokens", type=lambda s: tuple(int(x) for x in s.split(",")),
                    default=(200, 300), metavar="MIN,MAX")
    ap.add_argument("--per-prompt", type=int, default=4, help="documents per prompt")
    ap.add_argument("--zipf", type=float, default=1.0, help="popularity skew (rank^-s)")
    ap.add_argument("--system-tokens", type=int, default=40)
    ap.add_argument("--question-tokens", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=4, help="output tokens per request")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="p2p (the connector as deployed), no-p2p (local-only plans)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the forwarding checks of real vLLM answers")
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument("--keep", action="store_true",
                    help="keep the work dir (logs, results.json: every phase's figures)")
    ap.add_argument("--report", metavar="RESULTS_JSON",
                    help="print the report of a kept run's results.json; run nothing")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            saved = json.load(f)
        args = argparse.Namespace(**dict(saved["args"], doc_tokens=tuple(
            saved["args"]["doc_tokens"])))
        report(args, summarize(saved["phases"]), [tuple(c) for c in saved["checks"]],
               saved["keys_ok"], saved["run_s"], saved["model"])
        return
    modes = [m for m in args.modes.split(",") if m]
    settings = [s for s in args.settings.split(",") if s]
    assert all(m in MODES for m in modes) and all(s in SETTINGS for s in settings)

    sys.path.insert(0, os.path.join(ROOT, "tests", "vllm"))  # run_engine.connector_config
    from pikv.local_cluster import LocalCluster
    bin_dir = os.environ.get("PIKV_BIN_DIR", os.path.join(ROOT, "build", "bin"))
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="pikv-routing-bench-")
    model = make_model(args.layers, work)
    cluster = LocalCluster(os.path.join(bin_dir, "pikv"), nodes=2, redis="off",
                           cpu_capacity="1GiB")
    controller_http = next(p["http"] for p in cluster.processes if p["role"] == "controller")
    servers, routers, phases, checks, keys_ok = [], {}, [], [], {}
    try:
        for setting in settings:
            p2p = setting == "p2p"
            t0 = time.monotonic()
            servers = [Server(args, model, cluster, i, i, p2p, work, setting) for i in range(2)]
            for s in servers:
                s.wait()
            print(f"[{setting}] vLLM servers up in {time.monotonic() - t0:.0f} s", flush=True)
            routers = {m: Router(m, servers, controller_http, model, args, p2p, work, setting)
                       for m in modes}
            for s in servers:  # an engine's first forward pass pays one-off costs
                post_json(s.url + "/v1/completions", {"model": model, "prompt": list(
                    range(500, 600)), "max_tokens": 2})
            if not args.no_check and not checks:
                checks = check_forwarding(routers[modes[-1]], servers[0], model)
                print(f"[{setting}] forwarding checks: "
                      f"{sum(ok for _, ok, _ in checks)}/{len(checks)} ok", flush=True)
            for rnd in range(args.rounds):
                requests = workload(args, args.seed + rnd)
                order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
                for mode in order:
                    clear_nodes(cluster)
                    router = routers[mode]
                    before = [s.metrics() for s in servers]
                    pulled0, rstats0 = node_pulled_bytes(cluster), router.stats()
                    results, seconds = run_phase(router.url, model, requests, args)
                    ok_tokens = sum(n for t, _, n in results if t is not None)
                    all_tokens = sum(n for _, _, n in results)
                    after = settled_metrics(servers, before, all_tokens)
                    pulled1, rstats1 = node_pulled_bytes(cluster), router.stats()
                    by_node = {b1["node"]: b1["requests"] - b0["requests"] for b0, b1 in
                               zip(rstats0["backends"], rstats1["backends"])}
                    ttft = [t for t, _, _ in results]
                    phase = {
                        "setting": setting, "mode": mode, "round": rnd, "ttft": ttft,
                        "failures": sum(t is None for t in ttft),
                        "why": [w for _, w, _ in results if w],
                        "prompt_tokens": delta(after, before, "vllm:prompt_tokens_total"),
                        "computed_tokens": delta(after, before, COMPUTED),
                        "loaded_tokens": delta(after, before, "vllm:pikv_loaded_tokens_total"),
                        "load_failures": delta(after, before, "vllm:pikv_load_failures_total"),
                        "p2p_bytes": sum(pulled1.values()) - sum(pulled0.values()),
                        "seconds": seconds, "by_node": by_node,
                        "score_fallbacks": rstats1["score_fallbacks"] -
                        rstats0["score_fallbacks"]}
                    if mode != "round-robin" and setting not in keys_ok:
                        keys_ok[setting] = keys_found(controller_http, model, args,
                                                      requests[-1][1])
                    phases.append(phase)
                    ok = [t for t in ttft if t is not None]
                    print(f"[{setting}] round {rnd} {mode:<12} {len(ok)} ok "
                          f"{phase['failures']} failed, mean TTFT "
                          f"{sum(ok) / max(1, len(ok)):.3f} s, computed "
                          f"{phase['computed_tokens']:.0f} of {phase['prompt_tokens']:.0f} "
                          f"(sent {ok_tokens} ok), P2P {phase['p2p_bytes'] / 2**20:.1f} MiB, "
                          f"{seconds:.0f} s, {by_node}", flush=True)
            for r in routers.values():
                r.stop()
            for s in servers:
                s.stop()
            routers, servers = {}, []
    finally:
        for r in routers.values():
            r.stop()
        for s in servers:
            s.stop()
        cluster.stop()
        results = {"args": vars(args), "phases": phases, "checks": checks, "keys_ok": keys_ok,
                   "run_s": time.monotonic() - t_start, "model": os.path.basename(model)}
        with open(os.path.join(work, "results.json"), "w") as f:
            json.dump(results, f)
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(args, summarize(phases), checks, keys_ok, results["run_s"], results["model"])


if __name__ == "__main__":
    main()
