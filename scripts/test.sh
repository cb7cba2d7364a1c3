#!/usr/bin/env bash
# Set up everything the tests need (system Chromium included) and run lint + the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's Chromium drives the browser test; the CJK and emoji fonts let its screenshots show Chinese
# text and emoji; python3-venv is what stock Debian needs for `python3 -m venv`.
if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "noto sans cjk" \
   || ! fc-list 2>/dev/null | grep -qi "noto color emoji" || ! python3 -m venv --help >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-noto-cjk fonts-noto-color-emoji python3-venv
fi
bash scripts/setup.sh --dev
.venv/bin/ruff check .
# The docs site, strictly: a broken link or anchor, a page missing from the nav or a `:::` identifier that no
# longer resolves fails the run. NO_MKDOCS_2_WARNING quiets Material's end-of-life banner (requirements-dev.txt).
site_dir="$(mktemp -d)"
trap 'rm -rf "$site_dir"' EXIT
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site_dir"
# Two workers, one per core of CI's machine; a file's tests stay on one worker (tests/conftest.py groups them),
# so a module's fixtures (an AppTest, a tiny model, a server) are built once. Extra arguments go to pytest:
# `-m "not slow"`, a path, ...
.venv/bin/python -m pytest -q -n "${ATTNVIZ_TEST_WORKERS:-2}" --dist loadfile "$@"
