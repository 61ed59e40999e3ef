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
    ("command-a.json", {"dtype": "bf16"}),
    ("command-r7b.json", {"dtype": "bf16"}),
    ("deepseek-v2-lite.json", {}),
    ("deepseek-v3.json", {}),
    ("gemma-2-9b.json", {}),
    ("gemma-3-1b-it.json", {}),
    ("gemma-3-4b-it.json", {}),
    ("gpt-j-6b.json", {"dtype": "f16"}),
    ("gpt-oss-20b.json", {"dtype": "bf16"}),
    ("llama-2-7b.json", {}),
    ("llama-3.1-8b.json", {}),
    ("llama-3.1-8b.json", {"dtype": "f16"}),
    ("llama-3.2-1b.json", {}),
    ("llama-4-scout-17b-16e-instruct.json", {}),
    ("mistral-7b-v0.3.json", {}),
    ("phi-2.json", {}),
    ("phi-3-mini-128k-instruct.json", {}),
    ("phi-3-mini-128k-instruct.json", {"max_model_len": 4096}),
    ("phi-3.5-mini-instruct.json", {"max_model_len": 131072}),
    ("pythia-1.4b.json", {}),
    ("qwen2.5-7b-instruct-yarn.json", {}),
    ("qwen3-8b.json", {}),
    ("smollm3-3b.json", {}),
]

DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
INTERLEAVED_MODEL_TYPES = {"gptj", "codegen", "deepseek_v2", "deepseek_v3", "cohere", "cohere2"}
# What Gemma3TextConfig.__init__ fills in where a published config is silent.
GEMMA3_TEXT_DEFAULTS = dict(num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                            head_dim=256, hidden_size=2304, max_position_embeddings=131072,
                            rope_theta=1_000_000.0, rope_local_base_freq=10_000.0,
                            sliding_window=4096, sliding_window_pattern=6)


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
            # Equal factors leave no medium band (Llama-4); vLLM takes 0 here.
            smooth = 0.0 if high == low else (old / wavelen - low) / (high - low)
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


def text_config(config):
    """The language model's config: a multimodal config's text_config (with
    the top level's dtype), class defaults filled in where the family's
    published configs rely on them."""
    if isinstance(config.get("text_config"), dict):
        text = dict(config["text_config"])
        for key in ("torch_dtype", "dtype"):
            if key in config and key not in text:
                text[key] = config[key]
        text.setdefault("model_type", config.get("model_type", "") + "_text")
        config = text
    if config.get("model_type") == "gemma3_text":
        config = dict(config)
        for key, value in GEMMA3_TEXT_DEFAULTS.items():
            if config.get(key) is None:
                config[key] = value
    return config


def rope_of(config, theta, rs, dim, options):
    """One RoPE: theta and rope_scaling (a dict, maybe empty) over `dim`."""
    kind = rs.get("rope_type", rs.get("type", "default"))
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
    return dict(rope_theta=theta, rope_scaling=kind, attention_factor=attention, inv_freq=inv)


def layer_types(config, n):
    """Each layer's attention type, as the families' config classes derive it."""
    if config.get("layer_types"):
        return list(config["layer_types"])
    model_type = config.get("model_type", "")
    if model_type in ("gemma3_text", "cohere2"):
        period = config.get("sliding_window_pattern") or (6 if model_type == "gemma3_text" else 4)
        return ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)]
    return ["full_attention"] * n


def rotating_layers(config, types):
    """Whether each layer applies RoPE: no_rope_layers (1 = RoPE) or its
    every-interval-th default (Llama-4, SmolLM3); Cohere2's sliding layers."""
    model_type, n = config.get("model_type", ""), len(types)
    if model_type in ("llama4_text", "smollm3"):
        listed = config.get("no_rope_layers")
        if model_type == "llama4_text" and not listed:
            listed = None  # Llama4TextConfig: an empty list means the default
        if listed is None:
            interval = config.get("no_rope_layer_interval") or 4
            listed = [int((i + 1) % interval != 0) for i in range(n)]
        return [bool(listed[i]) for i in range(n)]
    if model_type == "cohere2":
        return [t == "sliding_attention" for t in types]
    return [True] * n


def reference(config, options):
    config = text_config(config)
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

    dim = out["rotary_dim"]
    theta = float(first(config, "rope_theta", "rotary_emb_base", default=10000.0))
    main = rope_of(config, theta, config.get("rope_scaling") or {}, dim, options)
    out.update(main)
    # Per layer: the main RoPE, Gemma-3's local one (its own base, never
    # scaled) on sliding layers, or None (NoPE).
    local = None
    if model_type == "gemma3_text":
        local = rope_of(config, float(config["rope_local_base_freq"]), {}, dim, options)
    types = layer_types(config, layers)
    out["per_layer"] = [None if not rotates else
                        local if local and kind == "sliding_attention" else main
                        for kind, rotates in zip(types, rotating_layers(config, types))]
    return out


def close(a, b, rel=1e-12):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def compare_rope(name, want, got):
    errors = []
    for key in ("attention_factor", "rope_theta", "rope_scaling"):
        if want[key] != got[key] and not (isinstance(want[key], float) and
                                          close(want[key], got[key])):
            errors.append(f"{name}: {key} = {got[key]!r}, want {want[key]!r}")
    if len(want["inv_freq"]) != len(got["inv_freq"]):
        errors.append(f"{name}: {len(got['inv_freq'])} frequencies, want {len(want['inv_freq'])}")
    for i, (w, g) in enumerate(zip(want["inv_freq"], got["inv_freq"])):
        if not close(w, g):
            errors.append(f"{name}: inv_freq[{i}] = {g!r}, want {w!r}")
    return errors


def compare(name, want, got):
    errors = []
    for key, value in want.items():
        if key == "per_layer":
            continue
        if key not in got:
            errors.append(f"{name}: pikv does not report {key}")
        elif key == "inv_freq":
            errors += compare_rope(name + " main", want, got)
        elif isinstance(value, float):
            if not close(value, got[key]):
                errors.append(f"{name}: {key} = {got[key]!r}, want {value!r}")
        elif value != got[key]:
            errors.append(f"{name}: {key} = {got[key]!r}, want {value!r}")
    # Every layer's own RoPE, or none.
    if len(got.get("rope_layers", [])) != len(want["per_layer"]):
        return errors + [f"{name}: pikv reports {len(got.get('rope_layers', []))} layers' RoPE"]
    for layer, (w, index) in enumerate(zip(want["per_layer"], got["rope_layers"])):
        where = f"{name} layer {layer}"
        if (w is None) != (index is None):
            errors.append(f"{where}: {'NoPE' if index is None else 'RoPE'}, want "
                          f"{'NoPE' if w is None else 'RoPE'}")
        elif w is not None:
            errors += compare_rope(where, w, got["rope_specs"][index])
    return errors


def mutations(got):
    """pikv's answer with one layer's RoPE changed each way it can be: to the
    plan's other spec, to NoPE, or from NoPE to a spec. The comparison has to
    catch every one (it would not, were it blind to per-layer plans)."""
    layers, specs = got["rope_layers"], len(got["rope_specs"])
    for layer, index in enumerate(layers):
        for other in [None] + list(range(specs)):
            if other != index:
                yield layer, other, dict(got, rope_layers=layers[:layer] + [other] +
                                         layers[layer + 1:])


def main():
    pikv, config_dir = sys.argv[1], sys.argv[2]
    files = sorted(f for f in os.listdir(config_dir) if f.endswith(".json"))
    uncovered = set(files) - {f for f, _ in CASES}
    if uncovered:
        print(f"configs without a case: {sorted(uncovered)}")
        return 1
    errors, tried, caught = [], 0, 0
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
        got = json.loads(run.stdout)
        found = compare(name, want, got)
        errors += found
        # Each kind of layer swapped once: the reference must notice.
        seen = set()
        for layer, other, mutated in mutations(got):
            kind = (got["rope_layers"][layer], other)
            if kind in seen:
                continue
            seen.add(kind)
            tried += 1
            if compare(name, want, mutated):
                caught += 1
            else:
                errors.append(f"{name}: layer {layer} swapped to {other} went unnoticed")
        plan = want["per_layer"]
        main = sum(p is not None and p["rope_theta"] == want["rope_theta"] for p in plan)
        nope = sum(p is None for p in plan)
        per_layer = ("" if main == len(plan) else
                     f"; layers: {main} main, {len(plan) - main - nope} local, {nope} NoPE")
        print(f"{'ok  ' if not found else 'FAIL'} {name}: {want['rope_scaling']}, "
              f"rotary {want['rotary_dim']}/{want['head_dim']}, attention factor "
              f"{want['attention_factor']:.6f}, {want['kv_bytes_per_token']} B/token{per_layer}")
    for e in errors:
        print(e)
    print(f"{len(CASES)} cases, {len(errors)} mismatches; "
          f"{caught} of {tried} one-layer swaps caught")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
