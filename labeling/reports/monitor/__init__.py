"""The Monitor page's data, rules, sentences and charts (no Streamlit)."""
