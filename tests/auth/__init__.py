"""Tests of auth."""
