#!/usr/bin/env python3
"""An independent float64 reading of Hugging Face model configs, checked
against `pikv model-info --json` for every config under model_configs/.

The reference is written from the published formulas (transformers'
modeling_rope_utils and the vLLM rotary embeddings they mirror), in plain
Python floats (IEEE double), sharing no code with pikv. For each case it
compares the KV geometry, dtype, KV bytes per token, pairing, rotary width and
offset, theta, scaling type, the attention factor the engine bakes into
cos/sin, and every inverse frequency (relative 1e-12).

Usage: model_config_reference.py PIKV_BINARY CONFIG_DIR
"""

import json
import math
import os
import subprocess
import sys

# pikv deliberately refuses a config without a dtype (GPT-J, gpt-oss): these
# cases pass one, as an operator would. max_model_len picks LongRoPE's factors.
CASES = [
    ("deepseek-v2-lite.json", {}),
    ("deepseek-v3.json", {}),
    ("gemma-2-9b.json", {}),
    ("gpt-j-6b.json", {"dtype": "f16"}),
    ("gpt-oss-20b.json", {"dtype": "bf16"}),
    ("llama-2-7b.json", {}),
    ("llama-3.1-8b.json", {}),
    ("llama-3.1-8b.json", {"dtype": "f16"}),
    ("llama-3.2-1b.json", {}),
    ("mistral-7b-v0.3.json", {}),
    ("phi-2.json", {}),
    ("phi-3-mini-128k-instruct.json", {}),
    ("phi-3-mini-128k-instruct.json", {"max_model_len": 4096}),
    ("phi-3.5-mini-instruct.json", {"max_model_len": 131072}),
    ("pythia-1.4b.json", {}),
    ("qwen2.5-7b-instruct-yarn.json", {}),
    ("qwen3-8b.json", {}),
]

DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
INTERLEAVED_MODEL_TYPES = {"gptj", "codegen", "deepseek_v2", "deepseek_v3"}


def first(config, *names, default=None):
    for name in names:
        if config.get(name) is not None:
            return config[name]
    return default


def yarn_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def default_inv_freq(theta, dim):
    return [1.0 / theta ** (2 * i / dim) for i in range(dim // 2)]


def llama3(inv, rs):
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for f in inv:
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(f)
        elif wavelen > old / low:
            out.append(f / factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out


def yarn(theta, dim, rs, max_positions):
    factor = rs["factor"]
    original = rs.get("original_max_position_embeddings") or max_positions
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        extrapolation = 1.0 / theta ** (2 * i / dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        keep = 1 - ramp  # the share of the unscaled frequency
        out.append(extrapolation / factor * (1 - keep) + extrapolation * keep)
    attention = rs.get("attention_factor")
    if attention is None:
        if rs.get("mscale") and rs.get("mscale_all_dim"):
            attention = yarn_mscale(factor, rs["mscale"]) / yarn_mscale(factor, rs["mscale_all_dim"])
        else:
            attention = yarn_mscale(factor)
    return out, attention


def longrope(config, theta, dim, rs, max_model_len):
    original = first(config, "original_max_position_embeddings")
    original = first(rs, "original_max_position_embeddings", default=original)
    longest = max_model_len or config["max_position_embeddings"]
    factors = rs["long_factor"] if longest > original else rs["short_factor"]
    inv = [1.0 / (factors[i] * theta ** (2 * i / dim)) for i in range(dim // 2)]
    attention = rs.get("attention_factor")
    if attention is None:
        scale = config["max_position_embeddings"] / original
        attention = 1.0 if scale <= 1 else math.sqrt(1 + math.log(scale) / math.log(original))
    return inv, attention


def reference(config, options):
    model_type = config.get("model_type", "")
    layers = first(config, "num_hidden_layers", "n_layer")
    out = {"model_type": model_type, "layers": layers}
    if config.get("kv_lora_rank"):
        latent, rope = config["kv_lora_rank"], config["qk_rope_head_dim"]
        out.update(kv_format="mla", kv_heads=1, head_dim=latent + rope, latent_dim=latent,
                   rotary_dim=rope, rope_offset=latent)
    else:
        heads = first(config, "num_attention_heads", "n_head")
        head_dim = first(config, "head_dim", default=first(config, "hidden_size", "n_embd") // heads)
        if config.get("rotary_dim") is not None:
            rotary = config["rotary_dim"]
        else:
            rotary = int(head_dim * first(config, "partial_rotary_factor", "rotary_pct", default=1.0))
        out.update(kv_format="standard", kv_heads=first(config, "num_key_value_heads", default=heads),
                   head_dim=head_dim, latent_dim=0, rotary_dim=rotary, rope_offset=0)
    out["rope_style"] = "gptj" if model_type in INTERLEAVED_MODEL_TYPES else "neox"
    dtype = options.get("dtype") or DTYPES[first(config, "torch_dtype", "dtype")]
    out["dtype"] = dtype
    planes = 1 if out["kv_format"] == "mla" else 2
    out["kv_bytes_per_token"] = layers * planes * out["kv_heads"] * out["head_dim"] * DTYPE_BYTES[dtype]

    theta = float(first(config, "rope_theta", "rotary_emb_base", default=10000.0))
    rs = config.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    dim = out["rotary_dim"]
    inv = default_inv_freq(theta, dim)
    attention = 1.0
    if kind == "default":
        kind = "none"
    elif kind == "linear":
        inv = [f / rs["factor"] for f in inv]
    elif kind == "llama3":
        inv = llama3(inv, rs)
    elif kind == "yarn":
        inv, attention = yarn(theta, dim, rs, config["max_position_embeddings"])
    elif kind in ("longrope", "su"):
        kind = "longrope"
        inv, attention = longrope(config, theta, dim, rs, options.get("max_model_len", 0))
    else:
        raise ValueError(f"the reference does not implement rope type {kind}")
    out.update(rope_theta=theta, rope_scaling=kind, attention_factor=attention, inv_freq=inv)
    return out


def close(a, b, rel=1e-12):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def compare(name, want, got):
    errors = []
    for key, value in want.items():
        if key not in got:
            errors.append(f"{name}: pikv does not report {key}")
        elif key == "inv_freq":
            if len(value) != len(got[key]):
                errors.append(f"{name}: {len(got[key])} frequencies, want {len(value)}")
            for i, (w, g) in enumerate(zip(value, got[key])):
                if not close(w, g):
                    errors.append(f"{name}: inv_freq[{i}] = {g!r}, want {w!r}")
        elif isinstance(value, float):
            if not close(value, got[key]):
                errors.append(f"{name}: {key} = {got[key]!r}, want {value!r}")
        elif value != got[key]:
            errors.append(f"{name}: {key} = {got[key]!r}, want {value!r}")
    return errors


def main():
    pikv, config_dir = sys.argv[1], sys.argv[2]
    files = sorted(f for f in os.listdir(config_dir) if f.endswith(".json"))
    uncovered = set(files) - {f for f, _ in CASES}
    if uncovered:
        print(f"configs without a case: {sorted(uncovered)}")
        return 1
    errors = []
    for file, options in CASES:
        path = os.path.join(config_dir, file)
        with open(path) as f:
            want = reference(json.load(f), options)
        command = [pikv, "model-info", path, "--json"]
        if "dtype" in options:
            command += ["--dtype", options["dtype"]]
        if "max_model_len" in options:
            command += ["--max-model-len", str(options["max_model_len"])]
        run = subprocess.run(command, capture_output=True, text=True)
        name = file + (f" {options}" if options else "")
        if run.returncode != 0:
            errors.append(f"{name}: pikv model-info failed: {run.stderr.strip()}")
            continue
        found = compare(name, want, json.loads(run.stdout))
        errors += found
        print(f"{'ok  ' if not found else 'FAIL'} {name}: {want['rope_scaling']}, "
              f"rotary {want['rotary_dim']}/{want['head_dim']}, attention factor "
              f"{want['attention_factor']:.6f}, {want['kv_bytes_per_token']} B/token")
    for e in errors:
        print(e)
    print(f"{len(CASES)} cases, {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
