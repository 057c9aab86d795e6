"""Tests of abstracts."""
