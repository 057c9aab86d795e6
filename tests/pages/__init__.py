"""Tests of the Streamlit pages (AppTest)."""
