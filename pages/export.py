"""Export: exporters, leads and admins preview a gold set and download it with its manifest."""

from __future__ import annotations

import tempfile
import zipfile
from datetime import date
from pathlib import Path

import streamlit as st

from labeling.export.gold_set import (
    FORMATS,
    ExportError,
    ExportFilters,
    long_path,
    manifest_path,
    plan_export,
    preview_gold,
    write_gold,
)
from labeling.review.campaigns import list_campaigns
from labeling.settings import get_settings
from pages._errors import show_error
from pages._guard import engine, require, schema

user = require("export")
MIME = {"csv": "text/csv", "jsonl": "application/x-ndjson",
        "parquet": "application/vnd.apache.parquet"}  # fmt: skip

st.title("Export")
st.caption("A gold set: one row per work, with provenance and a manifest. The same database "
           "state always gives the same file (see the manifest's sha256).")  # fmt: skip
sch = schema()
campaigns = ["(all)"] + [c.name for c in list_campaigns(engine())]
left, right = st.columns(2)
with left:
    status = st.selectbox("Works", ["validated", "labelled", "all"], key="exp_status")
    campaign = st.selectbox("Campaign", campaigns, key="exp_campaign")
    questions = st.multiselect("Questions (none = all)", sch.names, key="exp_questions")
with right:
    fmt = st.selectbox("Format", list(FORMATS), key="exp_format")
    use_dates = st.checkbox("Only works labelled between", key="exp_use_dates")
    since = st.date_input("From", value=date.today(), key="exp_since", disabled=not use_dates)
    until = st.date_input("To", value=date.today(), key="exp_until", disabled=not use_dates)
    long_ = st.checkbox("Include every label (second file)", key="exp_long")
    pseudo = st.checkbox("Pseudonymize annotators", key="exp_pseudo")

filters = ExportFilters(
    status=status, campaign=None if campaign == "(all)" else campaign,
    questions=tuple(questions) or None,
    since=since if use_dates else None, until=until if use_dates else None,
)  # fmt: skip
try:  # one plan for the preview and the file: the filters are checked and resolved once
    plan = plan_export(engine(), sch, fmt=fmt, filters=filters, long=long_, pseudonymize=pseudo,
                       processes=get_settings().export_processes)  # fmt: skip
    pv = preview_gold(engine(), plan, limit=20)
except ExportError as exc:
    show_error(exc)
    st.stop()

st.subheader(f"{pv.total} works")
st.write(", ".join(f"{k}: {v}" for k, v in pv.counts.items()) or "No work matches the filters.")
if pv.rows:
    st.dataframe(pv.rows, column_order=pv.columns, hide_index=True)


def _build() -> bytes:
    """Run the export into a temporary folder and zip the file(s) with the manifest."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"gold.{fmt}"
        write_gold(engine(), plan, out, user_id=user.id)
        buf = Path(tmp) / "gold.zip"
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in (out, manifest_path(out), long_path(out, fmt)):
                if path.exists():
                    zf.write(path, path.name)
        return buf.read_bytes()


st.download_button(
    "Export and download (.zip: data, manifest" + (", labels)" if long_ else ")"),
    data=_build,
    file_name=f"gold-{fmt}.zip",
    mime="application/zip",
    key="exp_download",
    type="primary",
    disabled=pv.total == 0,
    on_click="ignore",
)
