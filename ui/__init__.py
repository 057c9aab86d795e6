"""Streamlit-side UI: client-side components the pages mount (never imported by labeling/)."""
