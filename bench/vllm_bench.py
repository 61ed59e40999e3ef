#!/usr/bin/env python3
"""Time to first token of RAG prompts in vLLM itself, with and without
pikv: [system + documents + question], the documents in a new order each
time. Run with the vLLM virtualenv (scripts/install-deps.sh vllm):

  .venv-vllm/bin/python bench/vllm_bench.py [--layers 4] [--docs 6] [--doc-tokens 1280]
                                            [--rounds 3] [--dtype bfloat16]

Three setups, each its own vLLM engine on one node of a local pikv
cluster (no Redis, so the second engine's chunks come P2P):
- alone: vLLM with its prefix cache on, without pikv; only the system
  prompt is ever a prefix hit once the documents move;
- cold: vLLM + pikv, nothing cached: the documents are computed in the
  reuse mode's form (--mode: prefixed, the connector's default, each after
  the system prompt; or isolated, each alone) and stored (precompute), then
  the prompt runs (TTFT = both);
- warm: a second vLLM + pikv engine on the other node, documents in new
  orders: every chunk is pulled P2P and remapped, vLLM computes the
  question only.
The split of a warm TTFT (plan, fetch + remap into the paged cache) is
measured in this process through the same ConnectorCore on a CPU cache of
the engine's geometry; compute is the rest. The model is the bench size of
scripts/make-model.py (Llama-3.2-1B's per-layer geometry, --layers of
them), made in a temp dir. Prints a table, then one JSON line.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def engine_job(model, dtype, pikv, tasks, engine):
    return {"model": model, "dtype": dtype, "pikv": pikv, "tasks": tasks, "engine": engine,
            "max_model_len": 16384}


def run(job, workdir, name):
    path, out = os.path.join(workdir, f"{name}.json"), os.path.join(workdir, f"{name}.out")
    with open(path, "w") as f:
        json.dump(job, f)
    log = os.path.join(workdir, f"{name}.log")
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "vllm", "run_engine.py"),
                             path, out], stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:  # the work dir goes with the bench: its log is shown here
        with open(log) as f:
            sys.exit(f"engine {name} exited {rc}:\n{f.read()[-6000:]}")
    with open(out) as f:
        return json.load(f)


def prompts(args, rounds, seed):
    r = random.Random(seed)
    vocab = 8192

    def seg(n):
        return [r.randrange(8, vocab) for _ in range(n)]

    system, docs = seg(args.system_tokens), [seg(args.doc_tokens) for _ in range(args.docs)]
    out = []
    for _ in range(rounds):
        order = docs[:]
        r.shuffle(order)
        out.append([system] + order + [seg(args.question_tokens)])
    return out


def warmup(args):
    """A short unrelated prompt: an engine's first forward pass pays one-off
    costs (allocations, kernel set-up) that no setup should be charged."""
    return {"op": "generate", "prompt": list(range(8, 8 + args.question_tokens)),
            "max_tokens": 1, "logprobs": 1, "prompt_logprobs": False}


def task(segments):
    return {"op": "generate", "prompt": sum(segments, []), "max_tokens": 1, "logprobs": 1,
            "prompt_logprobs": False, "segments": [len(s) for s in segments]}


def split_in_process(settings, segments, model, dtype, block_size):
    """Plan and fetch+remap of one warm prompt through ConnectorCore into a
    CPU cache of the engine's geometry and vLLM CPU packing."""
    from types import SimpleNamespace

    import torch
    from vllm.config import ModelConfig

    from pikv.connector import ConnectorCore
    from pikv.vllm import DEFAULT_SETTINGS, client_settings
    engine = SimpleNamespace(  # the settings the engines' connectors made
        model_config=ModelConfig(model=model, dtype=dtype, max_model_len=16384,
                                 skip_tokenizer_init=True),
        cache_config=SimpleNamespace(cache_dtype="auto"))
    core = ConnectorCore(client_settings(engine, settings), block_size=block_size,
                         defaults=DEFAULT_SETTINGS)
    o = core.options
    tokens = sum(segments, [])
    blocks = -(-len(tokens) // block_size)
    torch_dtype = getattr(torch, dtype)
    caches = {f"model.layers.{i}.self_attn.attn":
              torch.zeros(blocks, o.num_kv_heads, block_size, 2 * o.head_dim, dtype=torch_dtype)
              for i in range(o.num_layers)}
    core.register_kv_caches(caches, layout="vllm_cpu_vec")
    lengths = [len(s) for s in segments]
    t0 = time.monotonic()
    matched = core.num_matched_tokens(tokens, lengths)
    t1 = time.monotonic()
    result = core.load(tokens, list(range(blocks)), matched, lengths)
    t2 = time.monotonic()
    assert result.loaded_tokens == matched, "the in-process load fell short"
    return t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--docs", type=int, default=6)
    ap.add_argument("--doc-tokens", type=int, default=1280)
    ap.add_argument("--system-tokens", type=int, default=256)
    ap.add_argument("--question-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--block-size", type=int, default=128)
    ap.add_argument("--mode", default=None, choices=("prefixed", "isolated"),
                    help="the reuse mode (default: the connector's)")
    ap.add_argument("--distance-buckets", default=None,
                    help="prefixed mode's distance buckets (default: the connector's)")
    ap.add_argument("--recompute", default=None,
                    help="recompute in place at load, e.g. first:0.15 (default: the connector's)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "tests", "vllm"))
    from conftest import default_form_settings, start_cluster

    work = tempfile.mkdtemp(prefix="pikv-vllm-bench-")
    model = os.path.join(work, "model")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-model.py"), "--family",
                    "llama", "--size", "bench", "--layers", str(args.layers), "--dtype",
                    args.dtype, "--out", model], check=True, capture_output=True)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    engine = {"block_size": args.block_size, "max_num_batched_tokens": 16384}
    rounds = prompts(args, args.rounds + 1, seed=7)
    prompt_tokens = len(sum(rounds[0], []))
    cluster = start_cluster(nodes=2, redis="off", cpu_capacity="4GiB")
    try:
        alone = run(engine_job(model, args.dtype, None, [warmup(args)] + [task(p) for p in rounds],
                               dict(engine, enable_prefix_caching=True)), work, "alone")
        # The connector's own defaults where no flag names a form.
        form = {k: v for k, v in (("attention-mode", args.mode),
                                  ("distance-buckets", args.distance_buckets),
                                  ("recompute", args.recompute)) if v is not None}

        s1, s2 = (dict(default_form_settings(cluster, n), **form) for n in (0, 1))
        t0 = time.monotonic()
        # The cold engine also stores what the later rounds load (untimed):
        # with distance buckets a document moved to another bucket is a
        # copy of its own, which the warm engine pulls P2P like the rest.
        cold = run(engine_job(model, args.dtype, s1, [
            warmup(args), {"op": "precompute", "segments": rounds[0]}, task(rounds[0])] +
            [{"op": "precompute", "segments": r} for r in rounds[1:]], engine),
            work, "cold")
        warm = run(engine_job(model, args.dtype, s2, [warmup(args)] + [task(p) for p in rounds[1:]]
                              + [{"op": "metrics"}], engine), work, "warm")
        warm_metrics = warm["answers"].pop()
        plan_s, load_s = split_in_process(s2, rounds[1], model, args.dtype, args.block_size)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)

    alone_s = min(a["seconds"] for a in alone["answers"][2:])  # the system prompt cached
    precompute_s = cold["answers"][1]["seconds"]
    cold_s = precompute_s + cold["answers"][2]["seconds"]
    warm_each = [a["seconds"] for a in warm["answers"][1:]]
    warm_s = warm_each[0]  # every chunk pulled P2P
    local_s = min(warm_each[1:]) if len(warm_each) > 1 else None  # now on the engine's node
    computed = prompt_tokens - warm["answers"][1]["num_cached_tokens"]
    # What pikv recomputed in place, per warm prompt (the warmup recomputes nothing).
    recomputed = warm_metrics.get("vllm:pikv_recomputed_tokens", 0) / max(1, len(warm_each))
    rows = [("vLLM alone (prefix cache on)", alone_s), ("vLLM + pikv, cold (precompute + prompt)",
                                                         cold_s), ("vLLM + pikv, warm (P2P)", warm_s)] + \
        ([("vLLM + pikv, warm (chunks on its own node)", local_s)] if local_s else [])
    print(f"TTFT, {prompt_tokens}-token prompts ({args.docs} documents of {args.doc_tokens}), "
          f"Llama-3.2-1B geometry x {args.layers} layers, {args.dtype}, CPU")
    print(f"{'setup':<46}{'TTFT s':>10}{'vs alone':>10}")
    for name, s in rows:
        print(f"{name:<46}{s:>10.3f}{s / alone_s:>10.3f}")
    print(f"warm split (in this process, same core, chunks on the node): plan {plan_s * 1e3:.1f} ms, fetch+remap "
          f"{load_s * 1e3:.1f} ms, compute (rest) {(warm_s - plan_s - load_s) * 1e3:.1f} ms; "
          f"vLLM computed {computed} tokens, pikv recomputed {recomputed:.0f}")
    print("warm TTFT per round (the first pulls every chunk P2P): " +
          ", ".join(f"{s:.3f}" for s in warm_each))
    print(json.dumps({"prompt_tokens": prompt_tokens, "layers": args.layers, "dtype": args.dtype,
                      "mode": args.mode or "default",
                      "distance_buckets": args.distance_buckets or "default",
                      "recompute": args.recompute or "default",
                      "ttft_alone_s": alone_s, "ttft_cold_s": cold_s, "ttft_warm_s": warm_s,
                      "warm_vs_alone": warm_s / alone_s,
                      "ttft_warm_local_s": local_s, "cold_vs_alone": cold_s / alone_s,
                      "plan_ms": plan_s * 1e3, "fetch_remap_ms": load_s * 1e3,
                      "warm_computed_tokens": computed, "precompute_s": precompute_s,
                      "warm_recomputed_tokens": recomputed,
                      "warm_each_s": warm_each}))


if __name__ == "__main__":
    main()
