"""Frames: reading, checking and storing a machine-classified frame; synthetic and demo frames."""
