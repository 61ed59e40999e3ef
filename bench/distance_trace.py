"""What storing documents at their distance costs on a RAG trace: bytes
stored and hit rate of each distance-bucket scheme against `prefixed`
(every document right after the system prompt), keyed by pikv's own
client (Client.plan_keys: the planner's keys, buckets included).

  PYTHONPATH=build/python python3 bench/distance_trace.py [--prompts 5000]

The trace: documents of 80-250 tokens drawn by Zipf popularity (exponent
--zipf), 4-6 per prompt in random order, after one of --systems system
prompts. Two ways the cache fills:
- precompute: before each prompt runs, every chunk it lacks is computed
  in the scheme's form and stored (pikv.vllm.precompute); the hit rate is
  the share of chunk tokens already stored when the prompt arrives;
- requests only: the engine stores what an ordinary request computes in
  the mode's form (the system prompt, and the document right after it:
  bucket 0) and loads the longest stored prefix (vLLM's connector API
  provides a prefix of the prompt), so a missing document ends the load;
  a document missing at its bucket loads its adjacent copy where stored
  (the planner's fallback), counted apart.
Tokens stored are relative to prefixed's in the same run. No model, no
cluster: only the keys."""

import argparse
import json
import random

from pikv import _pikv

SCHEMES = ("none", "pow2", "128")


def client(scheme):
    options = _pikv.Options.load("", {
        "model-id": "trace", "num-layers": "1", "num-kv-heads": "1", "head-dim": "64",
        "attention-mode": "prefixed", "distance-buckets": scheme, "local-node": "",
        "controller": ""}, {})
    return _pikv.Client(options)


def trace(args):
    rng = random.Random(args.seed)
    docs = [[rng.randrange(1000, 50000) for _ in range(rng.randint(80, 250))]
            for _ in range(args.documents)]
    systems = [[rng.randrange(1000, 50000) for _ in range(rng.randint(30, 60))]
               for _ in range(args.systems)]
    weights = [1 / (i + 1) ** args.zipf for i in range(args.documents)]
    for _ in range(args.prompts):
        chosen = set()
        k = rng.randint(4, 6)
        while len(chosen) < k:
            chosen.add(rng.choices(range(args.documents), weights)[0])
        order = list(chosen)
        rng.shuffle(order)
        yield [rng.choice(systems)] + [docs[d] for d in order] + [[7, 8, 9]]


def replay(c, adjacent_client, prompts, precompute):
    """(chunk tokens loaded, of those from an adjacent copy standing in for
    a missing bucket's, chunk tokens, objects stored, tokens stored)."""
    held = {}  # key -> tokens
    loaded = stand_in = total = 0
    for segments in prompts:
        chunks = c.plan_keys(segments).chunks
        adjacent = [ch.key for ch in adjacent_client.plan_keys(segments).chunks]
        sizes = [len(segments[ch.segment]) for ch in chunks]
        total += sum(sizes)
        if precompute:
            loaded += sum(n for ch, n in zip(chunks, sizes) if ch.key in held)
            held.update({ch.key: n for ch, n in zip(chunks, sizes)})
            continue
        for ch, alt, n in zip(chunks, adjacent, sizes):  # the longest stored prefix
            if ch.key not in held and alt not in held:
                break
            loaded += n
            stand_in += n if ch.key not in held else 0
        # What the request computes in the mode's form: the system prompt
        # and the document right after it (at distance 0, every scheme's).
        held.update({ch.key: n for ch, n in zip(chunks[:2], sizes[:2])})
    return loaded, stand_in, total, len(held), sum(held.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=5000)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--systems", type=int, default=3)
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    prompts = list(trace(args))
    rows, out = [], {}
    adjacent = client("none")
    for fill in ("precompute", "requests"):
        base = None
        for scheme in SCHEMES:
            loaded, stand_in, total, objects, tokens = replay(client(scheme), adjacent, prompts,
                                                              fill == "precompute")
            base = base or tokens
            key = f"{fill}_{scheme}"
            out[key] = {"hit_rate": loaded / total, "adjacent_share": stand_in / total,
                        "objects": objects, "tokens": tokens, "tokens_vs_prefixed": tokens / base}
            rows.append(f"| {fill} | {'prefixed' if scheme == 'none' else scheme} | "
                        f"{100 * loaded / total:.1f} % | {100 * stand_in / total:.1f} % | "
                        f"{objects} | {tokens} | {tokens / base:.2f}× |")
    print(f"{args.prompts} prompts, {args.documents} documents (Zipf {args.zipf}), "
          f"{args.systems} system prompts")
    print("| cache filled by | buckets | chunk tokens hit | of them adjacent copies | objects | "
          "tokens stored | vs prefixed |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    print(json.dumps({"bench": "distance_trace", "prompts": args.prompts, "zipf": args.zipf,
                      **out}))


if __name__ == "__main__":
    main()
