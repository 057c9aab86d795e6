"""Tests of frame import."""
