#!/usr/bin/env bash
# Install the tool in .venv, build the offline demo database, and start the app.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
export LABELING_OPENALEX_OFFLINE=${LABELING_OPENALEX_OFFLINE:-true}
.venv/bin/labeling demo
exec .venv/bin/streamlit run app.py --browser.gatherUsageStats false "$@"
