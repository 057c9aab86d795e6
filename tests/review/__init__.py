"""Tests of campaigns, queue, labels, validation."""
