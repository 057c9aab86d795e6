"""Tests of end to end in headless Chromium."""
