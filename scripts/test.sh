#!/usr/bin/env bash
# Set up everything the tests need (system Chromium included) and run lint + the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
bash scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
