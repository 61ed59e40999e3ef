#!/usr/bin/env python3
"""python_connector_bench: time per loaded token through pikv.vllm's
PikvConnector (worker start_load_kv: plan + fetch + remap through the Python
binding into torch tensors) against the C++ client's plan + fetch + remap
(bench/client_load_bench) on the same chunks of the same running node, in
alternating rounds. Goal: the Python layer adds at most 10%.
--path torch (or both) loads through pikv.device, the engine's own torch
(what a GPU or NPU runs), --device names where the cache lives (cpu, cuda);
on a device a plain pinned host-to-device copy of the same bytes is the
baseline, and the landing per token is set beside a recompute estimate on
the same device (the model's dense FLOPs per token at the bf16 matmul rate
measured there). The torch path writes vLLM's own 4-D GPU cache (--layout
vllm, the default) or the 5-D flash shape; the C++ path the flash shape.

  /usr/bin/python3 bench/python_connector_bench.py [--chunks 4 --tokens 1024
      --rounds 5 --iterations 10 --config tests/device/model_configs/llama-3.2-1b.json
      --path cpp|torch|both --device cpu|cuda --layout vllm|flash]

Needs the build (build/bin, build/python). vLLM is not installed here: the
connector is driven through the test suite's stand-in of vLLM's connector
interface (tests/python/vllm_standin). Prints a table, then one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("PIKV_BUILD_DIR", os.path.join(ROOT, "build"))
sys.path[:0] = [os.path.join(BUILD, "python"), os.path.join(ROOT, "tests", "python"),
                os.path.join(ROOT, "tests", "python", "vllm_standin")]

import torch  # noqa: E402

import pikv  # noqa: E402
from pikv.local_cluster import LocalCluster  # noqa: E402
from pikv.vllm import PikvConnector, PikvConnectorMetadata, _Load  # noqa: E402
from standin_engine import vllm_config  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402


def segments(chunks, tokens):
    out = [[1000 + c * tokens + t for t in range(tokens)] for c in range(chunks)]
    return out + [[7, 8, 9]]


def cxx_round(ends, args, store):
    cmd = [os.path.join(BUILD, "bin", "client_load_bench"), "--local-node", ends["node"],
           "--controller", ends["controller"], "--model-config", args.config,
           "--chunks", str(args.chunks), "--tokens", str(args.tokens),
           "--iterations", str(args.iterations)] + (["--store"] if store else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["cxx_ns_per_token"]


def python_connector(ends, args, path, pin_arena=True):
    info = pikv.model_info(args.config)
    block = 16
    total = args.chunks * args.tokens + 3
    blocks = -(-total // block)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[info["dtype"]]
    layout = args.layout if path == "torch" else "flash"  # the C++ path: 5-D caches only
    H, D = info["kv_heads"], info["head_dim"]
    shape = (blocks, H, block, 2 * D) if layout == "vllm" else (2, blocks, block, H, D)
    caches = {f"layer.{i}": torch.zeros(*shape, dtype=dtype, device=args.device)
              for i in range(info["layers"])}
    config = vllm_config("bench", dtype, {
        "local-node": ends["node"], "controller": ends["controller"], "model-id": "bench",
        "model-config": args.config, "path": path, "kv_layout": layout,
        "pin_arena": pin_arena,
        # The C++ baseline stores the chunks alone (isolated keys); the data
        # path measured is the same in every mode.
        "attention-mode": "isolated"}, block_size=block)
    worker = PikvConnector(config, KVConnectorRole.WORKER)
    worker.register_kv_caches(caches)
    segs = segments(args.chunks, args.tokens)
    prompt = sum(segs, [])
    lengths = [len(s) for s in segs]
    # The sources the scheduler's plan gives the worker (vLLM plans once).
    plan = worker.core.plan_request(prompt, lengths)
    load = _Load("r", prompt, lengths, list(range(blocks)), args.chunks * args.tokens, plan)
    return worker, PikvConnectorMetadata(loads=[load]), load.num_tokens


def python_round(worker, meta, loaded, iterations):
    per_token = []
    for _ in range(iterations):
        worker.bind_connector_metadata(meta)
        t0 = time.perf_counter_ns()
        worker.start_load_kv(SimpleNamespace())
        for name in worker.core._layer_names:  # a device load is done when every layer is
            worker.wait_for_layer_load(name)
        if worker.core._device and worker.core._device.kv.device.type == "cuda":
            torch.cuda.synchronize()
        took = time.perf_counter_ns() - t0
        worker.clear_connector_metadata()
        if worker.get_block_ids_with_load_errors() or worker.core.stats.errors:
            raise RuntimeError("a load failed: it would not count as throughput")
        per_token.append(took / loaded)
    return statistics.median(per_token)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default=os.path.join(ROOT, "tests", "device", "model_configs",
                                                    "llama-3.2-1b.json"))
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--tokens", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--path", choices=["cpp", "torch", "both"], default="cpp")
    p.add_argument("--device", default="cpu")
    p.add_argument("--pin-arena", choices=["on", "off", "both"], default="on",
                   help="torch path on CUDA: the node's arena page-locked (on), copied through "
                        "a pinned buffer (off), or both measured")
    p.add_argument("--profile", action="store_true",
                   help="then profile one load per path (cProfile, by cumulative time)")
    p.add_argument("--layout", choices=["vllm", "flash"], default="vllm",
                   help="the torch path's cache: vLLM's 4-D GPU layout or the 5-D flash shape")
    args = p.parse_args()
    paths = ["cpp", "torch"] if args.path == "both" else [args.path]
    if args.device != "cpu" and "cpp" in paths:
        p.error("the cpp path writes CPU memory only: --path torch on a device")
    # Each measured way to load: (path, the node's arena page-locked), by its key in the figures.
    variants = {"python": ("cpp", True)} if "cpp" in paths else {}
    if "torch" in paths:
        variants["torch_path"] = ("torch", args.pin_arena != "off")
        if args.pin_arena == "both":
            variants["torch_path_unpinned"] = ("torch", False)
    # Room for every chunk in the CPU tier (what the hit path reads), with
    # security off: the bench measures the data path, as the C++ baseline does.
    need = args.chunks * args.tokens * pikv.model_info(args.config)["kv_bytes_per_token"]
    cluster = LocalCluster(os.path.join(BUILD, "bin", "pikv"), nodes=1, redis="off",
                           secure=False, cpu_capacity=f"{need // (1 << 20) + 256}MiB")
    ends = {"controller": cluster.controller, "node": cluster.nodes[0]["ipc"]}
    try:
        cxx_round(ends, args, store=True)  # stores the chunks, warms the node
        workers = {key: python_connector(ends, args, path, pin)
                   for key, (path, pin) in variants.items()}
        for worker, meta, loaded in workers.values():
            python_round(worker, meta, loaded, 2)  # warm-up
        cxx, py = [], {key: [] for key in variants}
        for _ in range(args.rounds):
            cxx.append(cxx_round(ends, args, store=False))
            for key, (worker, meta, loaded) in workers.items():
                py[key].append(python_round(worker, meta, loaded, args.iterations))
        if args.profile:
            for key, (worker, meta, loaded) in workers.items():
                profile(key, lambda: python_round(worker, meta, loaded, 1))
    finally:
        cluster.stop()
    info = pikv.model_info(args.config)
    cxx_ns = statistics.median(cxx)
    rows = [("C++ client: plan+fetch+remap (CPU)", cxx_ns)]
    names = {"python": "cpp path", "torch_path": "torch path",
             "torch_path_unpinned": "torch path, arena not pinned"}
    rows += [(f"start_load_kv, {names[key]} ({args.device})", statistics.median(py[key]))
             for key in variants]
    h2d = h2d_ns_per_token(info, args) if args.device != "cpu" else None
    if h2d:
        rows.append((f"plain host-to-{args.device} copy", h2d))
    recompute = recompute_ns_per_token(args) if args.device != "cpu" else None
    if recompute:
        rows.append((f"recompute estimate ({args.device})", recompute))
    print(f"{args.chunks} chunks x {args.tokens} tokens, {info['kv_bytes_per_token']} KV "
          f"bytes/token ({os.path.basename(args.config)}), {args.rounds} alternating rounds "
          f"of {args.iterations} loads; median of round medians")
    print(f"{'path':<50} {'ns/token':>10} {'GB/s':>8} {'vs C++':>8}")
    for name, ns in rows:
        print(f"{name:<50} {ns:>10.1f} {info['kv_bytes_per_token'] / ns:>8.2f} "
              f"{ns / cxx_ns:>8.3f}")
    figures = {"cxx_ns_per_token": round(cxx_ns, 1), "device": args.device,
               "chunks": args.chunks, "tokens_per_chunk": args.tokens,
               "kv_bytes_per_token": info["kv_bytes_per_token"]}
    for key in variants:
        ns = statistics.median(py[key])
        figures[f"{key}_ns_per_token"] = round(ns, 1)
        figures[f"{key}_vs_cxx"] = round(ns / cxx_ns, 4)
        figures[f"{key}_gbps"] = round(info["kv_bytes_per_token"] / ns, 3)
        if h2d:
            figures[f"{key}_vs_h2d"] = round(ns / h2d, 4)
            figures["h2d_ns_per_token"] = round(h2d, 1)
        if recompute:
            figures[f"{key}_vs_recompute"] = round(ns / recompute, 4)
            figures["recompute_ns_per_token"] = round(recompute, 1)
    if args.device != "cpu":
        figures["device_name"] = torch.cuda.get_device_name()
        if "torch_path" in py:
            print(f"on {figures['device_name']}; load GB/s over the plain copy's: "
                  f"{h2d / statistics.median(py['torch_path']):.3f} (goal >= 0.8)")
    if "cpp" in paths:
        print(f"python/cxx: {figures['python_vs_cxx']:.3f} (goal <= 1.10)")
    print(json.dumps(figures))


def h2d_ns_per_token(info, args):
    """A plain pinned host-to-device copy of the loaded bytes (the floor of a
    load onto a device)."""
    loaded = args.chunks * args.tokens
    host = torch.empty(loaded * info["kv_bytes_per_token"], dtype=torch.uint8, pin_memory=True)
    dev = torch.empty_like(host, device=args.device)
    times = []
    for _ in range(args.iterations):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        times.append((time.perf_counter_ns() - t0) / loaded)
    return statistics.median(times)


def profile(path, fn):
    """Where one load's time goes (Python calls, the C++ calls under them)."""
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(18)
    print(f"--- profile of one load, {path} path\n" + out.getvalue())


def recompute_ns_per_token(args):
    """What computing a chunk's KV would cost per token on the device: the
    model's dense FLOPs per token (2 x the layers' weights, plus attention
    within a chunk of --tokens) at the bf16 matmul rate measured here on a
    prefill-shaped product. An estimate that favours recompute: real
    prefill runs below the matmul rate."""
    cfg = json.load(open(args.config))
    cfg = cfg.get("text_config", cfg)
    hidden, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or hidden // heads
    kv_heads = cfg.get("num_key_value_heads", heads)
    inter = cfg.get("intermediate_size", 4 * hidden)
    weights = layers * (hidden * head_dim * (2 * heads + 2 * kv_heads) + 3 * hidden * inter)
    flops = 2 * weights + 2 * layers * args.tokens * heads * head_dim
    a = torch.randn(args.tokens, hidden, dtype=torch.bfloat16, device=args.device)
    b = torch.randn(hidden, inter, dtype=torch.bfloat16, device=args.device)
    times = []
    for i in range(args.iterations + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter_ns() - t0) / 10)
    rate = 2 * args.tokens * hidden * inter / statistics.median(times)  # FLOP per ns
    return flops / rate


if __name__ == "__main__":
    main()
