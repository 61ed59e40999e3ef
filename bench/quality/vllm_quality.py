#!/usr/bin/env python3
"""The quality of pikv's reuse modes inside vLLM itself, judged against
full prefill, on real weights (SmolLM2-135M-Instruct, float32):

  .venv-vllm/bin/python bench/quality/vllm_quality.py [--prompts N] [--slice N]
      [--modes isolated,prefixed,prefixed:pow2,prefixed:pow2+first:0.15]

The task sets are bench/quality/tasks.py's (retrieval QA with a planted fact
and a distractor, continuation of a document's sentence, two facts from two
documents). A secure pikv cluster of two nodes and no Redis runs on
loopback, a fresh one per mode and slice of prompts. Per mode, a writer
engine (vLLM with pikv's connector, on node 1) precomputes every document
in the mode's form; a reader engine on node 2
answers every prompt with every document pulled P2P and only the question
computed (vLLM's own num_cached_tokens says what the plan gave it; a load
that then fell short is counted from the connector's metrics, and the
deadlines are set so a busy machine misses none). A mode may add distance
buckets (prefixed:pow2) and a recompute policy (+first:0.15, +blend:0.1):
the tokens a policy recomputes count as computed. Full prefill is vLLM
alone on the same prompts, unchunked. Engines are tests/vllm/run_engine.py
processes, one after the other.

Figures per task and mode: QA exact match (the planted number in the greedy
answer, 32 tokens) and how often the distractor's number is answered,
continuation NLL (nats/token, teacher forced) and top-1 agreement with full
prefill at each continuation token, two-fact exact match (both numbers),
prompt tokens computed, objects stored. Uncertainty: 95% intervals
(normal approximation; paired for the differences from full prefill). A
readable table, then one line of JSON.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path[:0] = [HERE, os.path.join(ROOT, "tests", "vllm")]

from tasks import TASKS, Tokenizer, make_tasks  # noqa: E402

ANSWER_TOKENS = 32  # two facts' sentences fit
PRECOMPUTE_BATCH = 48  # documents per precompute call (one plan, one vLLM batch)


def real_model():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "real-model.py")],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def run_engine(workdir, name, model, pikv, tasks):
    """One vLLM engine process over `tasks` (tests/vllm/run_engine.py)."""
    job, out = os.path.join(workdir, f"{name}.json"), os.path.join(workdir, f"{name}.out.json")
    with open(job, "w") as f:
        json.dump({"model": model, "dtype": "float32", "pikv": pikv, "tasks": tasks,
                   "max_model_len": 2048, "engine": {},
                   # answers, not timings: vLLM's engine core and worker in
                   # the engine's process (one start, not three)
                   "in_process": True}, f)
    log = os.path.join(workdir, f"{name}.log")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"))
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "vllm", "run_engine.py"),
                             job, out], stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        with open(log) as f:
            raise SystemExit(f"engine {name} exited {rc}:\n{f.read()[-4000:]}")
    print(f"  engine {name}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    with open(out) as f:
        return json.load(f)["answers"]


def requests(prompts, chunked):
    """Every prompt as run_engine's generate_many tasks: one batch for the
    answered tasks (greedy), one for continuations (prompt logprobs of the
    true continuation, which is part of the prompt)."""
    def one(p):
        tokens = p.tokens + list(p.continuation)
        segs = [len(p.prefix)] + [len(d.ids) for d in p.docs] + \
            [len(p.question) + len(p.continuation)]
        return {"prompt": tokens, "segments": segs if chunked else None}

    answered = [p for p in prompts if p.task != "continuation"]
    scored = [p for p in prompts if p.task == "continuation"]
    out = []
    if answered:
        out.append({"op": "generate_many", "prompts": [one(p) for p in answered],
                    "max_tokens": ANSWER_TOKENS, "logprobs": 1, "prompt_logprobs": False})
    if scored:
        out.append({"op": "generate_many", "prompts": [one(p) for p in scored],
                    "max_tokens": 1, "logprobs": 1, "prompt_logprobs": 1})
    return answered + scored, out


def precompute_tasks(prompts, buckets="none"):
    """Every document of `prompts` in the mode's form: grouped by system
    prompt (in prefixed mode a document is stored once per prefix), a
    dummy question closing each group. With distance buckets, each prompt
    as it is used (a document stored at the bucket of its distance)."""
    if buckets != "none":
        return [{"op": "precompute_many", "prompts": [
            [list(p.prefix)] + [list(d.ids) for d in p.docs] + [[2]] for p in prompts]}]
    groups = {}
    for p in prompts:
        docs = groups.setdefault(p.prefix, {})
        for d in p.docs:
            docs.setdefault(d.ids, None)
    tasks = []
    for prefix, docs in groups.items():
        docs = list(docs)
        for i in range(0, len(docs), PRECOMPUTE_BATCH):
            segs = [list(prefix)] + [list(d) for d in docs[i:i + PRECOMPUTE_BATCH]] + [[2]]
            tasks.append({"op": "precompute", "segments": segs})
    return tasks


def score(prompt, answer, full, tok):
    """The per-prompt figures of one answer (and full prefill's, to agree with)."""
    rec = {"task": prompt.task, "index": prompt.index, "computed": len(prompt.tokens) + len(prompt.continuation) -
           answer["num_cached_tokens"], "tokens": len(prompt.tokens) + len(prompt.continuation)}
    if prompt.task == "continuation":
        n = len(prompt.continuation)
        at = len(prompt.tokens)
        steps = answer["prompt_logprobs"][at:at + n]
        rec["nll"] = -sum(s[str(t)] for s, t in zip(steps, prompt.continuation)) / n
        if full is not None:
            ref = full["prompt_logprobs"][at:at + n]
            top = lambda s: max(s, key=s.get)  # noqa: E731
            rec["top1"] = sum(top(a) == top(b) for a, b in zip(steps, ref)) / n
    else:
        text = tok.decode(answer["tokens"])
        rec["answer"] = text
        rec["em"] = all(x in text for x in prompt.expect)
        if prompt.distractor:
            rec["distractor"] = prompt.distractor in text
    return rec


def mean_ci(xs):
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / max(1, n - 1)
    return m, 1.96 * math.sqrt(var / n)


def summarize(records, full_records):
    """{task: {figure: value}} for one mode."""
    out = {}
    for task in TASKS:
        rs = [r for r in records if r["task"] == task]
        if not rs:
            continue
        f = {"prompts": len(rs),
             "computed_share": sum(r["computed"] for r in rs) / sum(r["tokens"] for r in rs)}
        if task == "continuation":
            f["nll"], f["nll_ci"] = mean_ci([r["nll"] for r in rs])
            if full_records is not None:
                fr = [r for r in full_records if r["task"] == task]
                f["nll_minus_full"], f["nll_minus_full_ci"] = mean_ci(
                    [r["nll"] - q["nll"] for r, q in zip(rs, fr)])
                whole = [r["nll"] - q["nll"] for r, q in zip(rs, fr) if r.get("whole")]
                if len(whole) > 1:
                    f["whole_prompts"] = len(whole)
                    f["nll_whole_minus_full"], f["nll_whole_minus_full_ci"] = mean_ci(whole)
                f["top1_vs_full"] = sum(r.get("top1", 1.0) for r in rs) / len(rs)
        else:
            em = [r["em"] for r in rs]
            f["em"] = sum(em) / len(em)
            f["em_ci"] = 1.96 * math.sqrt(f["em"] * (1 - f["em"]) / len(em))
            if task == "qa":
                f["distractor"] = sum(r["distractor"] for r in rs) / len(rs)
            if full_records is not None:
                fr = [r["em"] for r in full_records if r["task"] == task]
                f["em_minus_full"], f["em_minus_full_ci"] = mean_ci(
                    [float(a) - float(b) for a, b in zip(em, fr)])
                # Over the prompts whose documents all loaded (a load that
                # fell short computed more, which flatters the mode).
                pairs = [(float(r["em"]), float(b)) for r, b in zip(rs, fr) if r.get("whole")]
                if len(pairs) > 1:
                    f["whole_prompts"] = len(pairs)
                    f["em_whole"] = sum(a for a, _ in pairs) / len(pairs)
                    f["em_whole_minus_full"], f["em_whole_minus_full_ci"] = mean_ci(
                        [a - b for a, b in pairs])
        out[task] = f
    return out


def table(results, stored):
    rows = ["| mode | task | prompts | tokens computed | QA / two-fact exact match | "
            "distractor | continuation NLL | NLL − full | top-1 = full | objects stored |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode, per_task in results.items():
        for task, f in per_task.items():
            em = f"{100 * f['em']:.1f} % ± {100 * f['em_ci']:.1f}" if "em" in f else ""
            if "em_minus_full" in f:
                em += f" ({100 * f['em_minus_full']:+.1f} ± {100 * f['em_minus_full_ci']:.1f})"
            dis = f"{100 * f['distractor']:.1f} %" if "distractor" in f else ""
            nll = f"{f['nll']:.3f} ± {f['nll_ci']:.3f}" if "nll" in f else ""
            diff = (f"{f['nll_minus_full']:+.3f} ± {f['nll_minus_full_ci']:.3f}"
                    if "nll_minus_full" in f else "")
            top = f"{100 * f['top1_vs_full']:.1f} %" if "top1_vs_full" in f else ""
            rows.append(f"| {mode} | {task} | {f['prompts']} | "
                        f"{100 * f['computed_share']:.1f} % | {em} | {dis} | {nll} | {diff} | "
                        f"{top} | {stored[mode][0] if mode in stored else ''} |")
    return "\n".join(rows)


def bucket_of(buckets, d):
    """The client's DistanceBuckets::BucketOf, for counting what is stored."""
    if buckets == "none" or d == 0:
        return 0
    if buckets == "pow2":
        p = 1 << (d.bit_length() - 1)
        return 2 * p if d * d >= 2 * p * p else p
    step = int(buckets)
    return (d + step // 2) // step * step


def mode_settings(mode):
    """A --modes entry as connector settings: isolated, prefixed, or
    prefixed:<distance-buckets> (pow2, or a step in tokens), each with an
    optional +<recompute policy> (first:<ratio> or blend:<ratio>)."""
    mode, _, recompute = mode.partition("+")
    name, _, buckets = mode.partition(":")
    return {"attention-mode": name, "distance-buckets": buckets or "none",
            "recompute": recompute or "none"}


def recomputed_of(prompt, policy, layers):
    """Tokens' worth a recompute policy computes for a wholly loaded prompt
    (pikv.recompute: count_of(ratio, n) per document; blend's selection
    pass one layer of every loaded token and layer 1 of the documents')."""
    if policy == "none":
        return 0.0
    name, _, ratio = policy.partition(":")
    docs = [len(d.ids) for d in prompt.docs]
    chosen = sum(min(n, max(1, math.ceil(float(ratio) * n))) for n in docs)
    selection = (len(prompt.prefix) + 2 * sum(docs)) / layers if name == "blend" else 0.0
    return chosen + selection


def stored_tokens(prompts, mode):
    """(objects, tokens) the mode stores for `prompts`: one per document
    (isolated), per (system prompt, document) (prefixed), or per (system
    prompt, bucket, document) (prefixed at distance buckets), and the
    system prompts; bytes are tokens times the model's KV bytes per token."""
    s = mode_settings(mode)
    objects = {p.prefix: len(p.prefix) for p in prompts}
    for p in prompts:
        at = 0
        for d in p.docs:
            b = bucket_of(s["distance-buckets"], at)
            key = d.ids if s["attention-mode"] == "isolated" else (p.prefix, b, d.ids)
            objects[key] = len(d.ids)
            at += len(d.ids)
    return len(objects), sum(objects.values())


def kv_bytes_per_token(config):
    """K and V of one token over every layer, in float32 (the bench's dtype)."""
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return config["num_hidden_layers"] * 2 * config.get("num_key_value_heads", heads) * \
        head_dim * 4


def size_bytes(text):
    """'3GiB', '512MiB' as bytes (the node's own size syntax, the units used here)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * scale
    raise SystemExit(f"--cpu-capacity {text!r}: give GiB or MiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=300, help="per task")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--modes", default="isolated,prefixed",
                    help="isolated, prefixed, prefixed:pow2, prefixed:<step>, each with an "
                    "optional +first:<ratio> or +blend:<ratio> (recompute in place)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default=None, help="default: scripts/real-model.py's float32")
    ap.add_argument("--out", help="per-prompt records (JSON)")
    ap.add_argument("--slice", type=int, default=100,
                    help="prompts per task precomputed and answered at a time")
    ap.add_argument("--cpu-capacity", default="3GiB",
                    help="each node's CPU tier (the node reserves it at start)")
    args = ap.parse_args()
    model = args.model or real_model()
    tok = Tokenizer(model)
    sets, _, digest = make_tasks(tok, args.tasks.split(","), args.prompts, args.seed)
    prompts = [p for task in args.tasks.split(",") for p in sets[task]]

    from pikv.local_cluster import LocalCluster
    bin_dir = os.environ.get("PIKV_BIN_DIR", os.path.join(ROOT, "build", "bin"))
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    layers = config["num_hidden_layers"]
    token_bytes = kv_bytes_per_token(config)
    records, results, stored, short, counted, failed = {}, {}, {}, {}, {}, {}

    def settings(cluster, node, mode):
        # Deadlines no busy machine misses: a late locate plans a miss and
        # a late pull fails a load, which vLLM then computes (its
        # num_cached_tokens does not show a failed load, so the figures
        # would count it as loaded).
        return dict(cluster.security_settings("engine"), **{
            "local-node": cluster.nodes[node]["ipc"], "controller": cluster.controller,
            "locate-budget": "2s", "fetch-timeout": "60s", **mode_settings(mode)})

    with tempfile.TemporaryDirectory() as work:
        order, batches = requests(prompts, chunked=False)
        full = {(p.task, p.index): (score(p, a, None, tok), a) for p, a in
                zip(order, run_engine(work, "full", model, None, batches))}
        records["full"] = [r for r, _ in full.values()]
        results["full"] = summarize(records["full"], None)
        for mode in args.modes.split(","):
            recs, short[mode] = [], 0
            stored[mode] = stored_tokens(prompts, mode)
            for k in range(0, args.prompts, args.slice):
                part = [p for p in prompts if k <= p.index < k + args.slice]
                # A cluster of its own per slice, sized to hold it: an object
                # evicted before its reader came would be computed again and
                # flatter the form (the 2026-12-07 run's cluster, shared by
                # every slice and mode, lost a quarter of the bucketed
                # prompts' documents that way).
                need = stored_tokens(part, mode)[1] * token_bytes
                if need > 0.9 * size_bytes(args.cpu_capacity):
                    raise SystemExit(f"a slice of {mode} stores {need / 2**30:.2f} GiB, more than "
                                     f"a node's CPU tier holds ({args.cpu_capacity}): "
                                     f"use a smaller --slice")
                cluster = LocalCluster(os.path.join(bin_dir, "pikv"), secure=True, nodes=2,
                                       redis="off", cpu_capacity=args.cpu_capacity)
                try:
                    run_engine(work, f"{mode}-writer-{k}", model, settings(cluster, 0, mode),
                               precompute_tasks(part, mode_settings(mode)["distance-buckets"]))
                    order, batches = requests(part, chunked=True)
                    answers = run_engine(work, f"{mode}-reader-{k}", model,
                                         settings(cluster, 1, mode), batches + [{"op": "metrics"}])
                finally:
                    cluster.stop()
                metrics = answers.pop()
                failed[mode] = failed.get(mode, 0) + metrics.get("vllm:pikv_load_failures", 0)
                counted[mode] = counted.get(mode, 0) + \
                    metrics.get("vllm:pikv_recomputed_tokens", 0) + \
                    metrics.get("vllm:pikv_selection_tokens", 0)
                for p, a in zip(order, answers):
                    _, ref = full[p.task, p.index]
                    recs.append(score(p, a, ref, tok))
                    # Every document loaded: vLLM computed the question only.
                    whole = recs[-1]["computed"] == len(p.question) + len(p.continuation)
                    short[mode] += not whole
                    recs[-1]["whole"] = whole
                    # What pikv recomputed in place counts as computed.
                    recs[-1]["recomputed"] = recomputed_of(
                        p, mode_settings(mode)["recompute"], layers) if whole else 0.0
                    recs[-1]["computed"] += recs[-1]["recomputed"]
            key = {(r["task"], r["index"]): r for r in records["full"]}
            recs.sort(key=lambda r: (r["task"], r["index"]))
            records[mode] = recs
            results[mode] = summarize(recs, [key[r["task"], r["index"]] for r in recs])
            print(f"  {mode}: {stored[mode][0]} objects ({stored[mode][1]} tokens) stored; "
                  f"{short[mode]} prompts not wholly planned, {failed.get(mode, 0)} loads "
                  f"that fell short; recomputed "
                  f"{sum(r['recomputed'] for r in recs):.0f} tokens' worth (the connector "
                  f"counted {counted.get(mode, 0):.0f})", file=sys.stderr)
    print(table(results, stored))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f)
    print(json.dumps({"bench": "quality_vllm", "model": os.path.basename(model),
                      "pool": digest, "prompts_per_task": args.prompts, "results": results,
                      "objects_stored": stored, "prompts_not_wholly_loaded": short,
                      "recomputed_counted_by_connector": counted,
                      "loads_fallen_short": failed}))


if __name__ == "__main__":
    main()
