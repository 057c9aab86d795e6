"""The `labeling` command: a thin click group over the labeling package (entry: main.main)."""
