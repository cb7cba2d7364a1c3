#!/usr/bin/env bash
# Set up everything the tests need (system Chromium included) and run lint + the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's Chromium drives the browser test; the CJK font lets its screenshots show Chinese text.
if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "noto sans cjk"; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-noto-cjk
fi
bash scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
