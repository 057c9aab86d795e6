"""Export: gold sets as CSV, JSON Lines or Parquet, with provenance and a manifest."""
