#!/usr/bin/env python3
"""Writes a model directory vLLM and transformers both load, with no hub:
a real architecture's config.json and seeded random weights in safetensors
(transformers' from_config + save_pretrained). No tokenizer: prompts are
token ids (vLLM's skip_tokenizer_init).

  make-model.py --family llama|qwen3|gemma3 --size test|bench --out DIR
                [--layers N] [--seed S] [--dtype bfloat16|float32]

Weights are drawn so every layer matters: unit-scale activations and
logits with a spread of a few units. vLLM's dummy loader gives near-uniform
weights, under which any two computations agree and a comparison proves
nothing; these make a wrong KV visible in the logits.

Geometry: `test` is 2 layers, hidden 256, 4 query heads over 2 KV heads of
64 dims, vocab 2048 (seconds to load and run on a CPU); `bench` is
Llama-3.2-1B's per-layer geometry (hidden 2048, 32 heads over 8 KV heads of
64 dims, MLP 8192) with a smaller vocabulary and --layers of them.
"""

import argparse
import json
import math
import pathlib

import torch

# Each family's published RoPE and quirks, at the sizes below.
FAMILIES = {
    # Llama-3.2: llama3 frequency scaling over base 500000.
    "llama": dict(model_type="llama", architectures=["LlamaForCausalLM"],
                  rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                   "factor": 32.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192},
                  tie_word_embeddings=False),
    # Qwen3: per-head q/k RMSNorm, base 1000000.
    "qwen3": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"],
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                  tie_word_embeddings=False),
    # Gemma-3 text: sliding layers rotate with their own base, every sixth
    # layer is global with linear scaling (a per-layer RoPE plan).
    "gemma3": dict(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
                   rope_parameters={
                       "full_attention": {"rope_type": "linear", "factor": 8.0,
                                          "rope_theta": 1000000.0},
                       "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                   sliding_window=512, query_pre_attn_scalar=64,
                   tie_word_embeddings=True),
}

SIZES = {
    "test": dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, vocab_size=2048, layers=2),
    "bench": dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=64, vocab_size=8192, layers=16),
}


def build_config(family, size, layers, max_len):
    from transformers import AutoConfig
    fields = dict(FAMILIES[family])
    geometry = dict(SIZES[size])
    geometry["num_hidden_layers"] = layers or geometry.pop("layers")
    geometry.pop("layers", None)
    model_type = fields.pop("model_type")
    if family == "gemma3" and geometry["num_hidden_layers"] < 6:
        # Keep one global layer at any depth: the last one.
        n = geometry["num_hidden_layers"]
        fields["layer_types"] = ["sliding_attention"] * (n - 1) + ["full_attention"]
    return AutoConfig.for_model(model_type, max_position_embeddings=max_len,
                                rms_norm_eps=1e-6, **geometry, **fields)


@torch.no_grad()
def draw_weights(model, seed, zero_centered_norms):
    """Unit-scale activations: each linear map's weights have std
    1/sqrt(fan_in); embeddings and the output head 2/sqrt(hidden), so
    logits spread over a few units; norm gains near one (Gemma's are
    stored as offsets from one)."""
    gen = torch.Generator().manual_seed(seed)
    hidden = model.config.hidden_size
    for name, p in sorted(model.named_parameters()):
        if p.dim() == 2 and ("embed" in name or "lm_head" in name):
            std = 2.0 / math.sqrt(hidden)
        elif p.dim() == 2:
            std = 1.0 / math.sqrt(p.shape[1])
        elif "norm" in name:
            base = 0.0 if zero_centered_norms else 1.0
            p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            continue
        else:  # biases
            std = 0.02
        p.copy_(std * torch.randn(p.shape, generator=gen))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=sorted(FAMILIES), required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="test")
    ap.add_argument("--layers", type=int, default=0, help="layers (default: the size's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--max-len", type=int, default=16384)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM
    config = build_config(args.family, args.size, args.layers, args.max_len)
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    draw_weights(model, args.seed, zero_centered_norms=args.family == "gemma3")
    model = model.to(getattr(torch, args.dtype))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    with open(out / "pikv-model.json", "w") as f:  # how it was made, for reports
        json.dump(vars(args), f, indent=1)
    print(f"{out}: {args.family} {args.size}, {config.num_hidden_layers} layers, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, {args.dtype}")


if __name__ == "__main__":
    main()
