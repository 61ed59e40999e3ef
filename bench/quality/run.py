#!/usr/bin/env python3
"""bench/quality: how well an LLM answers when its prompt's documents come
from pikv's position-independent KV cache, per reuse mode, against full
prefill; on real weights (SmolLM2-135M-Instruct, float32) with transformers.

  .venv-vllm/bin/python bench/quality/run.py [--model DIR] [--tasks qa,continuation,two_fact]
      [--prompts 300 | --quick] [--modes full,isolated,...] [--seed 0] [--out FILE.json]
      [--check | --no-check] [--threads 2] [--cache-gb 4] [--device cpu]

Each document's KV is computed once per (prefix, document, virtual start)
and kept (LRU, --cache-gb), re-rotated to where the document sits in each
prompt and spliced with the system prompt's KV into one cache per mode; the
question (+ answer) then runs over the modes' caches as one batch. The
first prompt is checked against tests/vllm/reference.py (one masked pass
over the whole prompt, written from the modes' definitions): every mode's
log-probs on the question and answer positions within 1e-3.
Prints a table per task and ends with one line of JSON (see README.md).
"""

import argparse
import json
import math
import os
import re
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass

# The machine is shared: OpenMP threads that spin while waiting for a
# descheduled sibling made long passes several times slower there.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "tests", "vllm")]

import tasks as T  # noqa: E402

DEFAULT_MODEL = os.path.expanduser("~/.cache/pikv/models/smollm2-135m-instruct-float32")
DEFAULT_MODES = ("full,isolated,prefixed,opener-1,opener-3,prefixed-real,prefixed-bucket-128,"
                 "prefixed-bucket-pow2,isolated+last,prefixed+last")
TOLERANCE = 1e-3  # max |log-prob difference| to the masked reference


@dataclass(frozen=True)
class Mode:
    name: str
    kind: str  # full, isolated, prefixed, opener, real, bucket
    k: int = 0  # opener length; bucket width (0: powers of two)
    last: bool = False  # the last document computed in context

    @staticmethod
    def parse(name):
        base, last = (name[:-5], True) if name.endswith("+last") else (name, False)
        fixed = {"full": "full", "isolated": "isolated", "prefixed": "prefixed",
                 "prefixed-real": "real"}
        if base in fixed and not (last and base == "full"):
            return Mode(name, fixed[base], 0, last)
        m = re.fullmatch(r"opener-(\d+)|prefixed-bucket-(\d+|pow2)", base)
        if m and m.group(1):
            return Mode(name, "opener", int(m.group(1)), last)
        if m and m.group(2):
            return Mode(name, "bucket", 0 if m.group(2) == "pow2" else int(m.group(2)), last)
        raise SystemExit(f"quality: unknown mode {name!r}")

    def distance(self, d):
        """How far after P a document `d` tokens after P is computed."""
        if self.kind == "real":
            return d
        if self.kind == "bucket":
            return d // self.k * self.k if self.k else (1 << (d.bit_length() - 1) if d else 0)
        return 0

    def place(self, plen, start):
        """(prefix length, virtual start): a document that starts at `start`
        is computed after P's first `prefix length` tokens, from `virtual
        start` on, and moved by start - virtual start."""
        if self.kind == "isolated":
            return 0, 0
        if self.kind == "opener":
            return self.k, self.k
        return plen, plen + self.distance(start - plen)

    @property
    def storable(self):
        return self.kind not in ("full", "real")

    def reference(self, plen):
        """tests/vllm/reference.py's arguments for this mode."""
        if self.kind == "full":
            return dict(mode="causal")
        if self.kind == "isolated":
            return dict(mode="isolated")
        if self.kind == "opener":
            return dict(mode="prefixed", prefix_tokens=self.k)
        return dict(mode="prefixed", prefix_tokens=plen, distance=self.distance)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def cat(kvs, dim=2):
    """Per-layer (K, V) lists joined along tokens (dim 2) or batch (dim 0)."""
    return [(torch.cat([kv[i][0] for kv in kvs], dim), torch.cat([kv[i][1] for kv in kvs], dim))
            for i in range(len(kvs[0]))]


class Engine:
    """The model, the system prompts' KV and the store of documents' KV."""

    def __init__(self, model_dir, device, cache_bytes):
        from transformers import AutoModelForCausalLM
        self.lm = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation="eager").eval().to(device)
        self.device = device
        self.prefixes = {}  # P's ids -> its KV
        self.store = OrderedDict()  # (prefix ids, doc ids, virtual start) -> KV, LRU
        self.store_bytes, self.cache_bytes = 0, cache_bytes
        self.hits = self.misses = 0
        self.shared = set()  # ids of the documents that occur in more than one prompt
        self.scratch = {}  # what was computed but not kept, for the prompt at hand

    def cache(self, kv=None):
        from transformers import DynamicCache
        return DynamicCache(kv) if kv else DynamicCache(config=self.lm.config)

    @staticmethod
    def layers(cache, start=0, copy=False):
        kv = [(l.keys[:, :, start:], l.values[:, :, start:]) for l in cache.layers]
        return [(k.clone(), v.clone()) for k, v in kv] if copy else kv

    @torch.no_grad()
    def run(self, cache, ids, start, rows=None):
        """Run `ids` (one row or a batch of equal rows) at positions start..
        over `cache` (extended in place); log-softmax at `rows` only."""
        ids = torch.as_tensor(ids, device=self.device)
        ids = ids[None] if ids.dim() == 1 else ids
        pos = torch.arange(start, start + ids.shape[1], device=self.device).expand_as(ids)
        h = self.lm.model(input_ids=ids, position_ids=pos, past_key_values=cache,
                          use_cache=True).last_hidden_state
        if rows is None:
            return None
        return torch.log_softmax(self.lm.lm_head(h[:, rows]).float(), dim=-1)

    def prefix_kv(self, prefix):
        if prefix not in self.prefixes:
            c = self.cache()
            self.run(c, prefix, 0)
            self.prefixes[prefix] = self.layers(c)
        return self.prefixes[prefix]

    def doc_kv(self, prefix, plen, doc, vstart, keep):
        """`doc`'s KV computed from `vstart` on after P's first `plen`
        tokens (at 0..plen-1), as stored: K rotated for `vstart`. Kept in
        the store if `keep`."""
        key = (prefix[:plen], doc.ids, vstart)
        if key in self.store:
            self.store.move_to_end(key)
            self.hits += 1
            return self.store[key]
        if key in self.scratch:
            return self.scratch[key]
        self.misses += 1
        c = self.cache([(k[:, :, :plen], v[:, :, :plen]) for k, v in self.prefix_kv(prefix)]
                       if plen else None)
        self.run(c, doc.ids, vstart)
        kv = self.layers(c, plen, copy=keep)
        if keep:
            self.store[key] = kv
            self.store_bytes += sum(k.nbytes + v.nbytes for k, v in kv)
            self.evict()
        else:
            self.scratch[key] = kv
        return kv

    def evict(self):
        """Oldest first, but copies computed at a distance from their
        prefix (buckets) before adjacent ones: those serve several modes
        and recur more often."""
        while self.store_bytes > self.cache_bytes and len(self.store) > 1:
            key = next((k for k in self.store if k[2] != len(k[0])), next(iter(self.store)))
            old = self.store.pop(key)
            self.store_bytes -= sum(k.nbytes + v.nbytes for k, v in old)

    def moved(self, kv, delta):
        """K re-rotated by `delta` positions: RoPE (rotate-half style) at
        `delta` from the model's own rotary embedding, in float32."""
        if delta == 0:
            return kv
        cos, sin = self.lm.model.rotary_emb(kv[0][0], torch.tensor([[delta]], device=self.device))
        cos, sin = cos[:, None], sin[:, None]  # over heads and tokens
        return [(k * cos + rotate_half(k) * sin, v) for k, v in kv]

    def context(self, mode, p, used):
        """The KV of `p` before its question as `mode` computes it, and how
        many of those tokens it computed for this prompt. `used` collects the
        store keys the mode needs (what it stores)."""
        P, starts = p.prefix, p.doc_starts
        kv_p = self.prefix_kv(P)
        if mode.kind == "full":  # P's KV is P's full prefill: the docs on top
            c = self.cache(kv_p)
            self.run(c, [t for d in p.docs for t in d.ids], len(P))
            return self.layers(c), p.question_start
        parts, computed = [kv_p], 0
        for doc, start in zip(p.docs[:-1] if mode.last else p.docs, starts):
            plen, vstart = mode.place(len(P), start)
            # A document seen once (a planted variant) or a copy at its real
            # distance would not be found again: computed, not kept.
            keep = mode.storable and doc.ids in self.shared
            parts.append(self.moved(self.doc_kv(P, plen, doc, vstart, keep), start - vstart))
            if mode.storable:
                used.add((P[:plen], doc.ids, vstart))
            else:
                computed += len(doc.ids)
        kv = cat(parts)
        if mode.last:  # attends to everything before it, like the question
            c = self.cache(kv)
            self.run(c, p.docs[-1].ids, starts[-1])
            kv, computed = self.layers(c), computed + len(p.docs[-1].ids)
        return kv, computed


def complete_numbers(text):
    """Numbers the text has finished writing (followed by a non-digit)."""
    return re.findall(r"\d+(?=\D)", text)


def evaluate(engine, tok, p, modes, used, max_new, keep_all=False):
    """All modes on prompt `p`, batched over modes after their contexts.
    Returns per-mode figures, seconds, and (keep_all) the log-probs at
    every question/answer position for the reference check."""
    seconds, ctx, computed = {}, [], {}
    engine.scratch.clear()
    for m in modes:
        t = time.perf_counter()
        kv, computed[m.name] = engine.context(m, p, used[m.name])
        ctx.append(kv)
        seconds[m.name] = time.perf_counter() - t
    t = time.perf_counter()
    cache = engine.cache(cat(ctx, dim=0))
    del ctx
    q0, nq = p.question_start, len(p.question)
    ids = list(p.question) + list(p.continuation[:-1])
    rows = (list(range(len(ids))) if keep_all else
            list(range(nq - 1, len(ids))) if p.continuation else [nq - 1])
    lp = engine.run(cache, [ids] * len(modes), q0, rows)  # (modes, rows, vocab)
    out = {m.name: {"computed": computed[m.name] + nq, "tokens": q0 + nq} for m in modes}
    steps = [[] for _ in modes]  # keep_all: log-probs after each fed answer token
    if p.continuation:
        cont = torch.tensor(p.continuation, device=lp.device)
        lp_c = lp[:, -len(cont):]
        full = lp_c[[m.kind for m in modes].index("full")]
        for i, m in enumerate(modes):
            out[m.name].update(
                nll=-float(lp_c[i].gather(1, cont[:, None]).mean()),
                top1=float((lp_c[i].argmax(-1) == full.argmax(-1)).float().mean()),
                kl=float((full.exp() * (full - lp_c[i])).sum(-1).mean()))
        gen = [list(p.continuation)] * len(modes)
    else:
        # Greedy, batched; a row is done at the end of its turn or once it
        # has stated as many numbers as asked for, and leaves the batch.
        need = len(p.expect)
        gen = [[] for _ in modes]
        alive = list(range(len(modes)))  # the batch's rows, as indices of modes
        last = lp[:, -1]
        for step in range(max_new):
            nxt = last.argmax(-1)
            keep = []
            for j, i in enumerate(alive):
                gen[i].append(int(nxt[j]))
                if not (gen[i][-1] == tok.im_end
                        or len(complete_numbers(tok.decode(gen[i]))) >= need):
                    keep.append(j)
            if not keep or step == max_new - 1:
                break
            if len(keep) < len(alive):
                idx = torch.tensor(keep, device=nxt.device)
                for layer in cache.layers:
                    layer.batch_select_indices(idx)
                nxt, alive = nxt[idx], [alive[j] for j in keep]
            last = engine.run(cache, nxt[:, None], q0 + nq + step, [0])[:, 0]
            if keep_all:  # the position after answer token `step`
                for j, i in enumerate(alive):
                    steps[i].append(last[j][None])
        for i, m in enumerate(modes):
            text = tok.decode([t for t in gen[i] if t != tok.im_end])
            nums = re.findall(r"\d+", text)[:need]
            r = out[m.name]
            r["answer"], r["answer_tokens"] = text, len(gen[i])
            r["em"] = sorted(nums) == sorted(p.expect)
            if p.distractor:
                r["distractor"] = nums == [p.distractor]
    seconds["question+answer (batched)"] = time.perf_counter() - t
    if not keep_all:
        return out, seconds, None
    # The last answer token is never fed: its row is not there.
    mine = [torch.cat([lp[i]] + steps[i]) for i in range(len(modes))]
    return out, seconds, (mine, gen)


def check(ref, p, modes, mine, gen):
    """Worst |log-prob difference| per mode to the masked reference, over
    the question and answer positions."""
    plen, tokens = len(p.prefix), p.tokens
    lengths = [plen] + [len(d.ids) for d in p.docs]
    worst = {}
    for i, m in enumerate(modes):
        open_from = 0 if m.kind == "full" else p.doc_starts[-1] if m.last else p.question_start
        want = ref.logprobs(tokens + list(gen[i]), lengths, open_from, **m.reference(plen))
        q0 = p.question_start
        worst[m.name] = float((mine[i] - want[q0:q0 + len(mine[i])].to(mine[i].device)).abs().max())
    return worst


def ci95(xs):
    """(mean, half-width of the normal 95% interval)."""
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return mean, 1.96 * math.sqrt(var / n)


def summarize(records, modes, used, docs_seen, pdocs_seen):
    """{mode: figures} for one task's records."""
    out = {}
    n = len(records)
    full = next(m.name for m in modes if m.kind == "full")
    for m in modes:
        rs = [r["modes"][m.name] for r in records]
        s = {"computed_pct": 100 * sum(r["computed"] / r["tokens"] for r in rs) / n,
             "stored_per_doc": (None if not m.storable and m.kind != "full" else
                                len(used[m.name]) / max(len(docs_seen), 1)),
             "stored_per_p_doc": (None if not m.storable and m.kind != "full" else
                                  len(used[m.name]) / max(len(pdocs_seen), 1)),
             "seconds_per_prompt": sum(r["seconds"][m.name] for r in records) / n}
        if "em" in rs[0]:
            k = sum(r["em"] for r in rs)
            pr = k / n
            s.update(em=k, em_pct=100 * pr, em_ci_pts=100 * 1.96 * math.sqrt(pr * (1 - pr) / n))
            fr = [r["modes"][full]["em"] for r in records]
            s["lost_vs_full"] = sum(f and not r["em"] for f, r in zip(fr, rs))
            s["gained_vs_full"] = sum(r["em"] and not f for f, r in zip(fr, rs))
            if "distractor" in rs[0]:
                s["distractor"] = sum(r["distractor"] for r in rs)
                s["distractor_pct"] = 100 * s["distractor"] / n
        if "nll" in rs[0]:
            s["nll"], s["nll_ci"] = ci95([r["nll"] for r in rs])
            s["dnll"], s["dnll_ci"] = ci95([r["nll"] - x["modes"][full]["nll"]
                                            for r, x in zip(rs, records)])
            s["top1"] = sum(r["top1"] for r in rs) / n
            s["kl"] = sum(r["kl"] for r in rs) / n
        out[m.name] = s
    return out


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(task, n, figures):
    cols = [("mode", lambda m, s: m, 22),
            ("computed", lambda m, s: f"{s['computed_pct']:.1f}%", 9),
            ("stored/doc", lambda m, s: fmt(s["stored_per_doc"], ".2f"), 10),
            ("/(P,doc)", lambda m, s: fmt(s["stored_per_p_doc"], ".2f"), 8)]
    first = next(iter(figures.values()))
    if "em" in first:
        cols += [("exact match", lambda m, s: f"{s['em']}/{n} {s['em_pct']:.1f}% "
                  f"±{s['em_ci_pts']:.1f} pts", 26),
                 ("vs full -lost/+won",
                  lambda m, s: f"-{s['lost_vs_full']}/+{s['gained_vs_full']}", 18)]
        if "distractor" in first:
            cols.append(("distractor",
                         lambda m, s: f"{s['distractor']} {s['distractor_pct']:.1f}%", 11))
    if "nll" in first:
        cols += [("NLL nats/tok", lambda m, s: f"{s['nll']:.3f} ±{s['nll_ci']:.3f}", 15),
                 ("ΔNLL vs full", lambda m, s: f"{s['dnll']:+.3f} ±{s['dnll_ci']:.3f}", 15),
                 ("top-1 = full", lambda m, s: f"{100 * s['top1']:.1f}%", 12),
                 ("KL(full||mode)", lambda m, s: f"{s['kl']:.4f}", 14)]
    cols.append(("s/prompt", lambda m, s: f"{s['seconds_per_prompt']:.2f}", 8))
    lines = [f"\n{task} ({n} prompts)",
             " | ".join(h.ljust(w) for h, _, w in cols)]
    lines.append("-+-".join("-" * w for _, _, w in cols))
    for m, s in figures.items():
        lines.append(" | ".join(f(m, s).ljust(w) for _, f, w in cols))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tasks", default=",".join(T.TASKS))
    ap.add_argument("--prompts", type=int, default=300, help="prompts per task")
    ap.add_argument("--quick", action="store_true", help="8 prompts per task (smoke test)")
    ap.add_argument("--modes", default=DEFAULT_MODES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pool", type=int, default=100, help="documents in the pool")
    ap.add_argument("--max-new", type=int, default=32, help="greedy answer tokens at most")
    ap.add_argument("--out", help="per-prompt records, JSON")
    ap.add_argument("--check", action="store_true", help="only check every mode against the "
                    "masked reference on each task's first prompt")
    ap.add_argument("--no-check", action="store_true", help="skip the check on the first prompt")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-gb", type=float, default=4.0, help="documents' KV kept, GiB")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n_prompts = 8 if args.quick else args.prompts
    task_names = [t for t in args.tasks.split(",") if t]
    for t in task_names:
        if t not in T.TASKS:
            raise SystemExit(f"quality: unknown task {t!r}")
    modes = [Mode.parse(x) for x in args.modes.split(",") if x]
    if not any(m.kind == "full" for m in modes):
        modes.insert(0, Mode.parse("full"))  # the baseline every figure compares with
    modes.sort(key=lambda m: m.kind != "full")

    tok = T.Tokenizer(args.model)
    prompts, pool, digest = T.make_tasks(tok, task_names, 1 if args.check else n_prompts,
                                         args.seed, args.pool)
    engine = Engine(args.model, args.device, int(args.cache_gb * 2**30))
    seen = set()
    for p in (p for ps in prompts.values() for p in ps):
        engine.shared.update(d.ids for d in p.docs if d.ids in seen)
        seen.update(d.ids for d in p.docs)
    print(f"quality: {args.model}, pool of {len(pool)} documents ({digest}), "
          f"{1 if args.check else n_prompts} prompts per task, "
          f"modes {', '.join(m.name for m in modes)}", file=sys.stderr)

    ref, checked = None, {}
    records, figures, timing = [], {}, {}
    for task in task_names:
        used = {m.name: set() for m in modes}
        docs_seen, pdocs_seen, task_records = set(), set(), []
        t0 = time.perf_counter()
        for p in prompts[task]:
            keep = (args.check or (not args.no_check and not checked))
            out, seconds, kept = evaluate(engine, tok, p, modes, used, args.max_new, keep_all=keep)
            if keep:
                if ref is None:
                    from reference import Reference
                    ref = Reference(args.model)
                t = time.perf_counter()
                worst = check(ref, p, modes, *kept)
                for name, w in worst.items():
                    checked[f"{task}/{name}"] = w
                    print(f"check [{task}] {name}: max |Δ logprob| {w:.2e} "
                          f"({'ok' if w < TOLERANCE else 'FAILED'})", file=sys.stderr)
                print(f"check took {time.perf_counter() - t:.0f} s", file=sys.stderr)
                if max(worst.values()) >= TOLERANCE:
                    raise SystemExit(f"quality: spliced caches differ from the masked reference "
                                     f"by more than {TOLERANCE}")
                if args.check:
                    break
            docs_seen.update(d.ids for d in p.docs)
            pdocs_seen.update((p.prefix, d.ids) for d in p.docs)
            rec = {"task": task, "index": p.index, "system": p.system,
                   "docs": [d.name for d in p.docs], "question": p.question_text,
                   "expect": list(p.expect), "distractor": p.distractor, "modes": out,
                   "seconds": seconds}
            task_records.append(rec)
            done = len(task_records)
            el = time.perf_counter() - t0
            print(f"[{task}] {done}/{len(prompts[task])} prompts, {el:.0f} s, "
                  f"{el / done:.1f} s/prompt, "
                  f"store {len(engine.store)} entries {engine.store_bytes / 2**30:.2f} GiB, "
                  f"hits {engine.hits} misses {engine.misses}", file=sys.stderr)
        if args.check:
            continue
        records += task_records
        figures[task] = summarize(task_records, modes, used, docs_seen, pdocs_seen)
        n = len(task_records)
        timing[task] = {"per_prompt": sum(sum(r["seconds"].values()) for r in task_records) / n,
                        "batched": sum(r["seconds"]["question+answer (batched)"]
                                       for r in task_records) / n}
    if args.check:
        print(json.dumps({"bench": "quality", "check": checked, "tolerance": TOLERANCE,
                          "ok": max(checked.values()) < TOLERANCE}))
        return

    for task in task_names:
        n = len([r for r in records if r["task"] == task])
        print(table(task, n, figures[task]))
        print(f"seconds per prompt: {timing[task]['per_prompt']:.1f} in all, of which "
              f"{timing[task]['batched']:.1f} the batched question+answer passes of all modes "
              f"(s/prompt above: that mode's context: its documents' passes not found in the "
              f"store, splicing, full prefill's pass)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"records": records, "pool": [d.name for d in pool]}, f)
    summary = {"bench": "quality", "model": os.path.basename(os.path.normpath(args.model)),
               "seed": args.seed, "prompts_per_task": n_prompts, "pool": len(pool),
               "pool_sha": digest, "python": sys.version.split()[0], "check": checked,
               "tasks": figures, "seconds_per_prompt": timing}
    print(json.dumps(summary, separators=(",", ":")))


if __name__ == "__main__":
    main()
