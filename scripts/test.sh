#!/usr/bin/env bash
# Install the tool with its test extras in .venv (and Chromium for the browser tests), check
# lint, format and types, then run every test on all cores (pytest-xdist; one file per worker
# at a time, so a module's server or database is built once). Extra arguments go to pytest
# (e.g. -m pg, -k queue); LABELING_TEST_WORKERS=0 runs in this process only.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [[ ! -x /usr/bin/chromium ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: /usr/bin/chromium is missing; browser tests will be skipped (apt-get install chromium)" >&2
  fi
fi
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # labeling/ and db/ (pyproject.toml [tool.mypy])
exec .venv/bin/python -m pytest -n "${LABELING_TEST_WORKERS:-auto}" --dist loadfile "$@"
