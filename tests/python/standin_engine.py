"""A torch stand-in for an inference engine, to drive pikv's connector the way
vLLM does.

- StandInModel: a Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU) with seeded
  weights. Its RoPE (frequencies, pairing, rotary width, the magnitude factor
  YaRN and LongRoPE bake into cos/sin, and each layer's own spec or none)
  comes from a real model's config.json through pikv's config reader; the
  body is smaller (`small_config`). Math in fp32; the KV cache in fp32 or
  bf16 (as engines keep it).
- PagedKv: per-layer paged KV tensors in vLLM's layouts: flash (2, blocks,
  block_size, H, D), block_major (blocks, 2, block_size, H, D) and HND
  (flash's shape over (2, blocks, H, block_size, D) memory).
- StandInVllm: a scheduler and a worker PikvConnector called in vLLM's order
  (get_num_new_matched_tokens, allocate, update_state_after_alloc,
  build_connector_meta, bind, start_load_kv, per-layer wait/save,
  wait_for_save, get_block_ids_with_load_errors, request_finished), computing
  only the tokens the connector did not provide, with plain causal attention
  over the request's blocks.
"""

import json
import os
import random
from types import SimpleNamespace

import torch

import pikv
from pikv.vllm import PikvConnector
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole


def small_config(config_path, out_dir, layers=2, vocab=256):
    """`config_path` with a small body (layers, vocabulary, hidden size, two
    query heads per KV head); every RoPE field and the head size kept, and
    per-layer lists cut to the first `layers`. A multimodal config's
    text_config becomes the config (with its dtype)."""
    with open(config_path) as f:
        cfg = json.load(f)
    if "text_config" in cfg:
        dtype = {k: cfg[k] for k in ("torch_dtype", "dtype") if k in cfg}
        cfg = dict(dtype, **cfg["text_config"])
    for key in ("layer_types", "no_rope_layers"):
        if cfg.get(key):
            cfg[key] = cfg[key][:layers]
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    kv_heads = cfg.get("num_key_value_heads", heads)
    # The hidden size is free of the heads (head_dim is explicit): at most 512,
    # so a model of many wide KV heads does not spend the test in its MLP.
    hidden = min(2 * kv_heads * head_dim, 512)
    cfg.update(num_hidden_layers=layers, vocab_size=vocab, head_dim=head_dim,
               num_key_value_heads=kv_heads, num_attention_heads=2 * kv_heads,
               hidden_size=hidden, intermediate_size=2 * hidden)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path


class StandInModel:
    def __init__(self, config_path, kv_dtype=torch.float32, seed=0):
        with open(config_path) as f:
            cfg = json.load(f)
        self.config_path = config_path
        self.rope = pikv.model_info(config_path, dtype="f32")
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg["num_key_value_heads"]
        self.head_dim = cfg["head_dim"]
        self.hidden = cfg["hidden_size"]
        self.vocab = cfg["vocab_size"]
        self.eps = cfg.get("rms_norm_eps", 1e-5)
        self.kv_dtype = kv_dtype
        g = torch.Generator().manual_seed(seed)

        def w(*shape, scale=None):
            return torch.randn(*shape, generator=g) * (scale or shape[0] ** -0.5)

        h, d, inter = self.hidden, self.head_dim, cfg["intermediate_size"]
        self.embed = torch.randn(self.vocab, h, generator=g)
        self.w = [dict(norm1=1 + 0.1 * torch.randn(h, generator=g), q=w(h, self.heads * d),
                       k=w(h, self.kv_heads * d), v=w(h, self.kv_heads * d),
                       o=w(self.heads * d, h), norm2=1 + 0.1 * torch.randn(h, generator=g),
                       gate=w(h, inter), up=w(h, inter), down=w(inter, h))
                  for _ in range(self.layers)]
        self.norm = 1 + 0.1 * torch.randn(h, generator=g)
        self.lm_head = w(h, self.vocab)
        # Each layer's RoPE (None: a NoPE layer), frequencies in float64.
        specs = [dict(spec, inv_freq=torch.tensor(spec["inv_freq"], dtype=torch.float64))
                 for spec in self.rope["rope_specs"]]
        for layer, s in zip(self.w, self.rope["rope_layers"]):
            layer["rope"] = None if s is None else specs[s]

    def _rms(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    @staticmethod
    def apply_rope(rope, x, positions):
        """The engine's own encoding at `positions` (angles in float64); a
        NoPE layer (rope None) leaves x as it is."""
        if rope is None:
            return x
        r, off = rope["rotary_dim"], rope["rope_offset"]
        angles = positions.double()[:, None] * rope["inv_freq"][None, :]
        cos = (torch.cos(angles) * rope["attention_factor"]).float()[:, None, :]
        sin = (torch.sin(angles) * rope["attention_factor"]).float()[:, None, :]
        x = x.clone()
        part = x[..., off:off + r]
        if rope["rope_style"] == "neox":
            a, b = part[..., :r // 2], part[..., r // 2:]
        else:
            a, b = part[..., 0::2], part[..., 1::2]
        ra, rb = a * cos - b * sin, b * cos + a * sin
        if rope["rope_style"] == "neox":
            x[..., off:off + r] = torch.cat([ra, rb], -1)
        else:
            x[..., off:off + r][..., 0::2] = ra
            x[..., off:off + r][..., 1::2] = rb
        return x

    def _qkv(self, layer, h, positions):
        n, d = h.shape[0], self.head_dim
        x = self._rms(h, layer["norm1"])
        q = self.apply_rope(layer["rope"], (x @ layer["q"]).view(n, self.heads, d), positions)
        k = self.apply_rope(layer["rope"], (x @ layer["k"]).view(n, self.kv_heads, d), positions)
        v = (x @ layer["v"]).view(n, self.kv_heads, d)
        return q, k, v

    def _attend(self, layer, h, q, k, v, allowed):
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * self.head_dim ** -0.5
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(q.shape[0], -1)
        h = h + out @ layer["o"]
        x = self._rms(h, layer["norm2"])
        return h + (torch.nn.functional.silu(x @ layer["gate"]) * (x @ layer["up"])) @ layer["down"]

    def _round(self, t):
        return t.to(self.kv_dtype).float()  # what a KV cache in kv_dtype holds

    def forward_scratch(self, segment_lengths):
        """Every token from scratch, positions 0.., under pikv's isolated mask:
        each chunk sees only itself; the question (last segment) sees all."""
        return lambda tokens: self._scratch(tokens, segment_lengths)

    def _scratch(self, tokens, lengths):
        n = len(tokens)
        seg = torch.cat([torch.full((m,), i) for i, m in enumerate(lengths)])
        pos = torch.arange(n)
        causal = pos[:, None] >= pos[None, :]
        same = seg[:, None] == seg[None, :]
        question = (seg == len(lengths) - 1)[:, None]
        return self.forward_masked(tokens, pos, causal & (same | question))

    def forward_masked(self, tokens, positions, allowed):
        """One pass over `tokens` at `positions`, row i attending to the
        rows allowed[i] holds: any mode's reference, written as a mask."""
        h = self.embed[torch.tensor(tokens)]
        for layer in self.w:
            q, k, v = self._qkv(layer, h, positions)
            h = self._attend(layer, h, q, self._round(k), self._round(v), allowed)
        return self._rms(h, self.norm) @ self.lm_head

    def chunk_kv(self, tokens, start=0):
        """A chunk's KV computed alone at positions start.. (0: what an audit
        recomputes), as pikv stores it: [layer][k|v][token][head][dim] in
        the KV dtype."""
        n = len(tokens)
        pos = torch.arange(start, start + n)
        allowed = pos[:, None] >= pos[None, :]
        h = self.embed[torch.tensor(tokens)]
        out = []
        for layer in self.w:
            q, k, v = self._qkv(layer, h, pos)
            k, v = self._round(k), self._round(v)
            out.append(torch.stack([k, v]))
            h = self._attend(layer, h, q, k, v, allowed)
        return torch.stack(out).to(self.kv_dtype).contiguous()

    def forward_paged(self, tokens, start, slots, cache):
        """Tokens start.. of a request, whose first `start` tokens are already
        in `cache` at slots[:start]: K/V of the new tokens go to their slots,
        then plain causal attention over the request's slots. Returns the new
        tokens' logits."""
        n = len(tokens)
        pos = torch.arange(start, n)
        all_pos = torch.arange(n)
        allowed = pos[:, None] >= all_pos[None, :]
        h = self.embed[torch.tensor(tokens[start:])]
        for i, layer in enumerate(self.w):
            q, k, v = self._qkv(layer, h, pos)
            cache.write(i, slots[start:], k, v)
            k_all, v_all = cache.read(i, slots)
            h = self._attend(layer, h, q, k_all, v_all, allowed)
        return self._rms(h, self.norm) @ self.lm_head


class PagedKv:
    """Per-layer paged KV tensors as vLLM allocates them; `tensors` are what
    the connector is given (HND: flash's logical shape over HND memory)."""

    def __init__(self, layout, layers, num_blocks, block_size, kv_heads, head_dim, dtype):
        self.block_size = block_size
        self.tensors, self._logical = [], []
        for _ in range(layers):
            if layout == "flash":
                t = torch.zeros(2, num_blocks, block_size, kv_heads, head_dim, dtype=dtype)
                logical = t
            elif layout == "block_major":
                t = torch.zeros(num_blocks, 2, block_size, kv_heads, head_dim, dtype=dtype)
                logical = t.permute(1, 0, 2, 3, 4)
            elif layout == "hnd":
                t = torch.zeros(2, num_blocks, kv_heads, block_size, head_dim, dtype=dtype)
                t = t.permute(0, 1, 3, 2, 4)
                logical = t
            else:
                raise ValueError(layout)
            self.tensors.append(t)
            self._logical.append(logical)

    def _index(self, slots):
        s = torch.tensor(slots)
        return s // self.block_size, s % self.block_size

    def write(self, layer, slots, k, v):
        b, o = self._index(slots)
        self._logical[layer][0, b, o] = k.to(self._logical[layer].dtype)
        self._logical[layer][1, b, o] = v.to(self._logical[layer].dtype)

    def read(self, layer, slots):
        b, o = self._index(slots)
        return self._logical[layer][0, b, o].float(), self._logical[layer][1, b, o].float()


def vllm_config(model_dir, dtype, extra_config, block_size=16, prefix_caching=False,
                hybrid_off=True):
    """The fields of vLLM's config that PikvConnector reads."""
    path = os.path.join(model_dir, "config.json")
    hf = json.load(open(path)) if os.path.isfile(path) else {}
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(kv_connector_extra_config=dict(extra_config),
                                           is_kv_producer=True,
                                           kv_load_failure_policy="recompute"),
        cache_config=SimpleNamespace(block_size=block_size, enable_prefix_caching=prefix_caching,
                                     cache_dtype="auto"),
        model_config=SimpleNamespace(model=model_dir, max_model_len=131072, dtype=dtype,
                                     hf_text_config=SimpleNamespace(to_dict=lambda: hf)),
        parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1),
        scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=hybrid_off))


class StandInVllm:
    """Plays vLLM around two PikvConnectors (scheduler and worker role)."""

    def __init__(self, model, model_dir, extra_config, layout, block_size=16, num_blocks=48,
                 seed=1):
        self.model = model
        self.block_size = block_size
        self.cache = PagedKv(layout, model.layers, num_blocks, block_size, model.kv_heads,
                             model.head_dim, model.kv_dtype)
        # Every layer's cache holds the whole prompt (PagedKv), as vLLM's
        # does with its hybrid manager off.
        # The packing by name, as vLLM's attention backend declares it.
        named = dict(extra_config, kv_layout="block_major" if layout == "block_major" else "flash")
        config = vllm_config(model_dir, model.kv_dtype, named, block_size, hybrid_off=True)
        self.scheduler = PikvConnector(config, KVConnectorRole.SCHEDULER)
        self.worker = PikvConnector(config, KVConnectorRole.WORKER)
        self.worker.register_kv_caches(
            {f"model.layers.{i}.self_attn.attn": t for i, t in enumerate(self.cache.tensors)})
        self._free = list(range(num_blocks))
        random.Random(seed).shuffle(self._free)  # blocks out of order, as a real pool hands them
        self._next_id = 0

    def run(self, tokens, params=None):
        """One request's prefill. Returns (logits of the tokens computed here,
        tokens the connector provided)."""
        self._next_id += 1
        request = SimpleNamespace(request_id=f"req-{self._next_id}", prompt_token_ids=list(tokens),
                                  kv_transfer_params=params, num_computed_tokens=0)
        external, is_async = self.scheduler.get_num_new_matched_tokens(request, 0)
        assert not is_async
        need = -(-len(tokens) // self.block_size)
        blocks, self._free = self._free[:need], self._free[need:]
        self.scheduler.update_state_after_alloc(request, SimpleNamespace(
            get_block_ids=lambda: (blocks,)), external)
        output = SimpleNamespace(
            scheduled_new_reqs=[SimpleNamespace(req_id=request.request_id,
                                                prompt_token_ids=list(tokens),
                                                block_ids=(list(blocks),),
                                                num_computed_tokens=external)],
            scheduled_cached_reqs=SimpleNamespace(req_ids=[], new_block_ids=[],
                                                  num_computed_tokens=[], resumed_req_ids=set()),
            num_scheduled_tokens={request.request_id: len(tokens) - external})
        meta = self.scheduler.build_connector_meta(output)
        self.worker.bind_connector_metadata(meta)
        self.worker.start_load_kv(SimpleNamespace())
        failed = self.worker.get_block_ids_with_load_errors()
        if failed:  # vLLM recomputes from the first block that failed to load
            external = min(external, min(blocks.index(b) for b in failed) * self.block_size)
        slots = [blocks[p // self.block_size] * self.block_size + p % self.block_size
                 for p in range(len(tokens))]
        for i in range(self.model.layers):
            self.worker.wait_for_layer_load(f"model.layers.{i}.self_attn.attn")
        logits = self.model.forward_paged(list(tokens), external, slots, self.cache)
        for i, t in enumerate(self.cache.tensors):
            self.worker.save_kv_layer(f"model.layers.{i}.self_attn.attn", t, None)
        self.worker.wait_for_save()
        self.worker.clear_connector_metadata()
        self.scheduler.request_finished(request, blocks)
        self._free += blocks
        return logits, external

    def generate(self, requests):
        """What precompute() needs: run each (prompt, kv_transfer_params) as
        a request of its own, and wait for the stores it started."""
        for tokens, params in requests:
            self.run(tokens, params)
        assert self.worker.core.wait_for_saves() == 0
