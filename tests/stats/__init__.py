"""Tests of statistics."""
