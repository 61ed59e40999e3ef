"""An independent reference for what vLLM answers with pikv's chunks:
transformers' own implementation of the same safetensors weights, in
float32, run once over the prompt with an explicit 4-D mask and explicit
positions. It reads no pikv code: each reuse mode is written here from its
definition (shared/DESIGN.md §4), as which earlier token each token may
see and at which position it sits.

- `causal`: the ordinary prompt (full prefill).
- `isolated`: a chunk's tokens attend causally within their chunk only.
- `prefixed`: the first segment (the system prompt) as in full prefill;
  every later chunk computed right after a prefix (the first
  `prefix_tokens` tokens of the prompt: all of the first segment by
  default, or a short opener) and then re-rotated to where it sits. RoPE
  scores depend only on relative positions, so that is one pass in which a
  copy of the prefix sits just before each chunk, at positions ending
  where the chunk starts, seen by that chunk alone. `distance(d)` moves the
  copy back: the chunk computed `distance(d)` tokens after the prefix, `d`
  being how far after it the chunk really sits (`d` itself: the prefix at
  its real distance, not storable position-independently; 0: adjacent).

In every mode the tokens from `open_from` on (the question, the generated
tokens, whatever vLLM recomputed after a failed load) attend to every real
token before them; the copies are seen only by their chunk.

`recompute` (positions R before `open_from`): recompute in place at load.
Each position in R is computed again, attending causally to the mode's
KV of the positions before it not in R and to the recomputed KV of those
in R; the tokens from `open_from` on read the recomputed KV for R."""

from dataclasses import dataclass, field

import torch


@dataclass
class Splice:
    """The extended sequence one pass runs: the prompt's tokens (`real`
    rows, in prompt order) with the prefix copies before their chunks."""
    tokens: list = field(default_factory=list)
    positions: list = field(default_factory=list)
    groups: list = field(default_factory=list)  # rows of one group see each other
    sees: dict = field(default_factory=dict)  # group -> the other group it sees
    real: list = field(default_factory=list)  # row of each prompt token
    open_from_row: int = 0
    prompt_at: list = field(default_factory=list)  # prompt position of a row (-1: a copy)
    recomputed: set = field(default_factory=set)  # R
    re_rows: list = field(default_factory=list)  # the rows computing R again

    def add(self, tokens, start, group, in_prompt=True):
        for t, token in enumerate(tokens):
            self.tokens.append(token)
            self.positions.append(start + t)
            self.groups.append(group)
            self.prompt_at.append(start + t if in_prompt else -1)

    def mask(self):
        """Additive (1, 1, n, n) float mask: 0 where attention is allowed."""
        n = len(self.tokens)
        group = torch.tensor(self.groups)
        seen = torch.tensor([self.sees.get(g, g) for g in self.groups])
        is_real = torch.zeros(n, dtype=torch.bool)
        is_real[self.real] = True
        i = torch.arange(n)
        causal = i[None, :] <= i[:, None]
        same = group[None, :] == group[:, None]
        sees = group[None, :] == seen[:, None]
        is_re = torch.zeros(n, dtype=torch.bool)
        is_re[self.re_rows] = True
        at = torch.tensor(self.prompt_at)
        in_r = is_real & torch.isin(at, torch.tensor(sorted(self.recomputed), dtype=at.dtype))
        # What the open rows and the recomputed rows read: the mode's KV but
        # for R, whose KV is the recomputed rows'.
        read = (is_real & ~in_r) | is_re
        opened = (i >= self.open_from_row)[:, None] & read[None, :]
        again = is_re[:, None] & read[None, :] & (at[None, :] <= at[:, None])
        allowed = (causal & ~is_re[:, None] & (same | sees | opened)) | again
        out = torch.zeros(n, n)
        out[~allowed] = torch.finfo(torch.float32).min
        return out[None, None]


def splice(tokens, chunk_lengths, open_from, mode="isolated", prefix_tokens=None,
           distance=None, recompute=()):
    """The pass that computes `tokens` as `mode` defines: chunks of
    `chunk_lengths` cover the prompt's start (the first is the system
    prompt), everything from `open_from` on is open."""
    if mode not in ("causal", "isolated", "prefixed"):
        raise ValueError(f"unknown mode {mode!r}")
    s = Splice()
    bounds = [0]
    for n in ([] if mode == "causal" else chunk_lengths):
        bounds.append(bounds[-1] + n)
    chunks = [(a, min(b, open_from)) for a, b in zip(bounds, bounds[1:]) if a < open_from]
    prefix = tokens[:prefix_tokens if prefix_tokens is not None else
                    (chunk_lengths[0] if chunk_lengths else 0)]
    for k, (a, b) in enumerate(chunks):
        if mode == "prefixed" and k > 0 and prefix:
            gap = a - len(prefix)
            moved = distance(gap) if distance else 0
            s.add(prefix, a - moved - len(prefix), ("prefix", k), in_prompt=False)
            s.sees[k] = ("prefix", k)
        s.real.extend(range(len(s.tokens), len(s.tokens) + b - a))
        s.add(tokens[a:b], a, k)
    at = chunks[-1][1] if chunks else 0
    s.recomputed = set(recompute)
    for r in sorted(s.recomputed):
        if r >= at:
            raise ValueError(f"recompute position {r} is not before the open tokens ({at})")
        s.re_rows.append(len(s.tokens))
        s.add([tokens[r]], r, "recomputed")
    s.open_from_row = len(s.tokens)
    s.real.extend(range(len(s.tokens), len(s.tokens) + len(tokens) - at))
    s.add(tokens[at:], at, "open")
    # Groups are compared as numbers: label them by first appearance.
    names = {}
    s.groups = [names.setdefault(g, len(names)) for g in s.groups]
    s.sees = {names[g]: names[h] for g, h in s.sees.items()}
    return s


class Reference:
    def __init__(self, model_dir):
        from transformers import AutoModelForCausalLM
        self.model = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32, attn_implementation="eager").eval()

    @torch.no_grad()
    def logprobs(self, tokens, chunk_lengths, open_from, **mode):
        """log-softmax of the next token after each prompt position, (n,
        vocab), as `splice` defines the pass (default: chunks isolated;
        open_from=0: the ordinary causal prompt)."""
        s = splice(list(tokens), chunk_lengths, open_from, **mode)
        out = self.model(input_ids=torch.tensor([s.tokens]), attention_mask=s.mask(),
                         position_ids=torch.tensor([s.positions]))
        return torch.log_softmax(out.logits[0, s.real].float(), dim=-1)

    def greedy(self, prompt, chunk_lengths, open_from, steps, **mode):
        """Greedy continuation under the same mode, and each step's logprobs."""
        tokens = list(prompt)
        for _ in range(steps):
            lp = self.logprobs(tokens, chunk_lengths, open_from, **mode)
            tokens.append(int(lp[-1].argmax()))
        return tokens[len(prompt):], self.logprobs(tokens, chunk_lengths, open_from, **mode)


def worst_difference(answer, ref_logprobs, prompt_len):
    """Largest |vLLM - reference| over every logprob vLLM reported: each
    generated step's top-k (and sampled token), and the prompt logprobs of
    the tokens it computed. Also how many values were compared. (vLLM
    0.32 returns uninitialised values as the prompt logprobs of positions
    a connector provided: those are skipped.)"""
    first = answer["num_cached_tokens"] + 1
    worst, compared = 0.0, 0
    for step, got in enumerate(answer["logprobs"]):
        for token, lp in got.items():
            worst = max(worst, abs(lp - float(ref_logprobs[prompt_len - 1 + step, int(token)])))
            compared += 1
    for pos, got in enumerate(answer["prompt_logprobs"]):
        if got is None or pos < first:
            continue
        for token, lp in got.items():
            worst = max(worst, abs(lp - float(ref_logprobs[pos - 1, int(token)])))
            compared += 1
    return worst, compared


def against(ref, answer, segments, steps, plain=True, **mode):
    """An answer to a prompt whose chunks vLLM loaded whole ([system,
    documents..., question] segments) against the reference of `mode`:
    (worst |Δ logprob|, values compared, the reference's greedy tokens,
    worst against the plain prefixed reference: how far the mode is from
    it, so a check can tell them apart)."""
    prompt = sum(segments, [])
    lengths = [len(s) for s in segments[:-1]]
    open_from = sum(lengths)
    tokens, lp = ref.greedy(prompt, lengths, open_from, steps, **mode)
    worst, compared = worst_difference(answer, lp, len(prompt))
    if plain:
        plain, _ = worst_difference(answer, ref.logprobs(prompt + answer["tokens"], lengths,
                                                         open_from, mode="prefixed"), len(prompt))
    return worst, compared, tokens, plain


def assert_exact(ref, answer, segments, steps, tolerance, what, distinct=True, **mode):
    """`answer` is the reference's for `mode` (against): greedy tokens
    alike, every logprob within `tolerance`, at least 5 per step compared;
    and, `distinct`, the plain prefixed reference answers otherwise (so the
    check tells the forms apart)."""
    worst, compared, tokens, plain = against(ref, answer, segments, steps, plain=distinct, **mode)
    print(f"\nexactness {what}: worst |dlogprob| {worst:.3g} over {compared} values" +
          (f"; the plain prefixed reference {plain:.3g}" if distinct else ""))
    assert compared >= steps * 5
    assert worst < tolerance
    assert answer["tokens"] == tokens
    if distinct:
        assert plain > 10 * tolerance, "the plain prefixed reference answers alike"
