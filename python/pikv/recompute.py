"""Recompute in place at load (shared/DESIGN.md §4): after a request's
chunks are placed in the engine's paged cache, chosen positions R of its
documents are computed again over every layer with the engine's own model
modules, each attending causally to the loaded K and V of the positions not
in R and to the new K and V of earlier positions in R; their new K and V
replace the loaded ones before the engine computes the question. What is
stored stays the mode's form; this only changes what a request reads.

Policies choose R among the documents' tokens (never the system prompt,
which every mode computes exactly as full prefill does), `ratio` of them:
- `first`: the first tokens of each document (EPIC: the attention sinks a
  document computed apart grows at its start);
- `blend`: the tokens whose K and V move most at layer 1 once layer 0 is
  computed over the whole request (CacheBlend's selection): that pass
  costs one layer of every loaded token, counted apart.

ModelRecompute runs vLLM's decoder layers themselves (norms, projections,
RoPE, MLP: Llama, Qwen2 and Qwen3 families) and stands in only for their
attention call, which reads and writes the paged cache through
pikv.paged.DeviceKv. One per worker; called on the engine's thread.
"""

import math
from dataclasses import dataclass

import torch

from pikv.errors import InvalidArgument

POLICIES = ("first", "blend")
QUERY_BLOCK = 256  # queries per fused attention call (its mask: QUERY_BLOCK x keys floats)
# Why a load that asked for a recompute got today's load instead (the label
# of recompute_fallbacks), and what its log line says.
FALLBACK_REASONS = {
    "no_model": "vLLM did not start pikv's plugin in this worker, or it found no model",
    "unsupported_model": "the model is not one recompute drives",
    "error": "the recompute failed; its blocks are computed by vLLM",
    "malformed": "the request's pikv_recompute is not none or <policy>:<ratio>",
}
# vLLM's model classes whose decoder layers ModelRecompute drives: each
# layer is called as layer(positions, hidden, residual) and its attention
# module as attn(q, k, v).
FAMILIES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")


@dataclass(frozen=True)
class Policy:
    """A recompute policy and its share of the documents' tokens."""
    name: str = "none"
    ratio: float = 0.0

    @property
    def active(self):
        return self.name != "none" and self.ratio > 0

    def __str__(self):
        return "none" if not self.active else f"{self.name}:{self.ratio:g}"


def parse_policy(text):
    """"none", or "<first|blend>:<ratio>" with 0 < ratio <= 1; raises
    InvalidArgument on anything else."""
    text = str(text).strip()
    if text in ("", "none"):
        return Policy()
    name, _, ratio = text.partition(":")
    try:
        share = float(ratio)
    except ValueError:
        share = math.nan
    if name not in POLICIES or not 0 < share <= 1:
        raise InvalidArgument(f"recompute {text!r} is not none or <{'|'.join(POLICIES)}>:<ratio> "
                              "with 0 < ratio <= 1")
    return Policy(name, share)


def document_spans(segments, end):
    """(start, stop) of each document of a split prompt ([system, documents...,
    question]) that lies before token `end`, clipped to it."""
    spans, at = [], len(segments[0])
    for seg in segments[1:-1]:
        stop = min(at + len(seg), end)
        if at < stop:
            spans.append((at, stop))
        at += len(seg)
    return spans


def count_of(ratio, n):
    """Tokens a ratio takes of n: at least one of a non-empty span."""
    return min(n, max(1, math.ceil(ratio * n))) if n else 0


def first_positions(spans, ratio):
    """`first`: the first count_of(ratio, n) tokens of each document."""
    return [p for a, b in spans for p in range(a, a + count_of(ratio, b - a))]


class _Captured(Exception):
    """Raised from a stand-in attention call to end a layer early (the
    selection pass needs a layer's K and V only)."""

    def __init__(self, k, v):
        super().__init__("captured")
        self.k, self.v = k, v


class ModelRecompute:
    """The worker's model, run over chosen positions of a request whose KV
    sits in `kv` (pikv.paged.DeviceKv over the engine's caches, layer i
    the attention module `attention[i]` of `model`'s decoder layer i).
    On a tensor-parallel engine each rank holds its heads, runs the same
    positions (vLLM's layers meet in their own collectives) and `group`
    (vLLM's TP group) sums the selection's scores over the ranks."""

    def __init__(self, model, attention, kv, group=None):
        name = type(model).__name__
        if name not in FAMILIES:
            raise InvalidArgument(f"recompute drives {', '.join(FAMILIES)}; this model is {name}")
        layers = list(model.model.layers)
        if len(layers) != len(attention) or len(attention) != kv.num_layers or any(
                getattr(layer.self_attn, "attn", None) is not a
                for layer, a in zip(layers, attention)):
            raise InvalidArgument("the model's decoder layers are not the cache's layers in order")
        for a in attention:
            if getattr(a, "sliding_window", None) is not None or \
                    getattr(a.impl, "logits_soft_cap", None):
                raise InvalidArgument(f"layer {a.layer_name}: a sliding window or soft cap "
                                      "is not recomputed")
        self.model, self.layers, self.attention, self.kv = model, layers, attention, kv
        self.device = kv.device
        self.group = group

    # --- positions -------------------------------------------------------

    def positions(self, policy, segments, tokens, slots):
        """R for `policy` over the documents before len(slots), and the
        token-layers its selection pass computed (0 for `first`)."""
        spans = document_spans(segments, len(slots))
        if policy.name == "first":
            return first_positions(spans, policy.ratio), 0
        candidates = [p for a, b in spans for p in range(a, b)]
        want = sum(count_of(policy.ratio, b - a) for a, b in spans)
        if not candidates:
            return [], 0
        score = self.deviation(tokens, candidates, slots)
        top = torch.topk(score, min(want, len(candidates))).indices.tolist()
        return sorted(candidates[i] for i in top), len(slots) + len(candidates)

    @torch.inference_mode()
    def deviation(self, tokens, candidates, slots):
        """Per candidate, how far its layer-1 K and V move (squared L2 over
        this rank's heads) once layer 0 is computed over every loaded token
        as it sits. Layer 0's own K and V depend on a token alone: the
        loaded ones are used, nothing is written."""
        every = list(range(len(slots)))
        hidden, residual = self._layer(0, tokens, every, slots, write=False)
        hidden, residual = hidden[candidates], residual[candidates]
        try:
            self._layer(1, tokens, candidates, slots, write=False, hidden=hidden,
                        residual=residual, capture=True)
        except _Captured as got:
            index = self.kv.index([slots[p] for p in candidates])
            old_k = self.kv.planes[1][0].take(self.kv.planes[1][0].index(*index)).float()
            old_v = self.kv.planes[1][1].take(self.kv.planes[1][1].index(*index)).float()
            n = len(candidates)
            k = got.k.reshape(n, -1).float() - old_k.reshape(n, -1)
            v = got.v.reshape(n, -1).float() - old_v.reshape(n, -1)
            score = k.pow(2).sum(-1) + v.pow(2).sum(-1)
            return self.group.all_reduce(score) if self.group is not None else score
        raise InvalidArgument("layer 1 computed no K and V")

    # --- the recompute --------------------------------------------------------

    @torch.inference_mode()
    def run(self, tokens, positions, slots):
        """Computes `positions` (sorted, each < len(slots)) of the request
        whose tokens 0..len(slots)-1 sit at `slots`, over every layer, and
        writes their new K and V there."""
        if not positions:
            return
        hidden, residual = None, None
        for i in range(len(self.layers)):
            hidden, residual = self._layer(i, tokens, positions, slots, write=True,
                                           hidden=hidden, residual=residual)

    def _layer(self, i, tokens, positions, slots, write, hidden=None, residual=None,
               capture=False):
        """Decoder layer i over `positions` (its input: the embeddings when
        `hidden` is None), its attention reading keys 0..max(positions) from
        the cache (with the new K and V of `positions` written first, when
        `write`)."""
        at = torch.tensor(positions, dtype=torch.int64, device=self.device)
        if hidden is None:
            ids = torch.tensor([tokens[p] for p in positions], dtype=torch.int64,
                               device=self.device)
            hidden = self.model.embed_input_ids(ids)
        attn = self.attention[i]
        keys = slots[:positions[-1] + 1]
        attn.forward = self._attend(i, at, [slots[p] for p in positions], keys, write, capture)
        try:
            return self.layers[i](at, hidden, residual)
        finally:
            del attn.forward

    def _attend(self, i, at, own_slots, key_slots, write, capture):
        kv, attn = self.kv, self.attention[i]
        heads, kv_heads = attn.num_heads, attn.num_kv_heads
        scale = attn.impl.scale

        def attend(q, k, v, output_shape=None, output_dtype=None):
            n = q.shape[0]
            q = q.reshape(n, heads, -1)
            k = k.reshape(n, kv_heads, -1)
            v = v.reshape(n, kv_heads, -1)
            if capture:
                raise _Captured(k, v)
            if write:
                own = kv.index(own_slots)
                kv.put(i, 0, own, k)
                kv.put(i, 1, own, v)
            index = kv.index(key_slots)
            # [1, kv heads, keys, dim]: torch's fused attention (a flash
            # kernel on CPU too) reads grouped heads without a copy each.
            keys = kv.planes[i][0].take(kv.planes[i][0].index(*index)).float()
            values = kv.planes[i][1].take(kv.planes[i][1].index(*index)).float()
            keys, values = keys.transpose(0, 1)[None], values.transpose(0, 1)[None]
            queries = q.float().transpose(0, 1)[None]
            out = torch.empty(n, heads, values.shape[-1], device=q.device)
            key_at = torch.arange(len(key_slots), device=q.device)
            # Queries in blocks (positions ascend): a block reads the keys
            # up to its last query's position, each query those up to its own.
            for a in range(0, n, QUERY_BLOCK):
                b = min(n, a + QUERY_BLOCK)
                end = int(at[b - 1]) + 1
                unseen = key_at[None, :end] > at[a:b, None]
                mask = torch.zeros(unseen.shape, device=q.device).masked_fill_(unseen, float("-inf"))
                out[a:b] = torch.nn.functional.scaled_dot_product_attention(
                    queries[:, :, a:b], keys[:, :, :end], values[:, :, :end],
                    attn_mask=mask[None, None], scale=scale, enable_gqa=True)[0].transpose(0, 1)
            return out.reshape(n, -1).to(output_dtype or q.dtype)

        return attend
