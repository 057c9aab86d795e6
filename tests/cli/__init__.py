"""Tests of the CLI."""
