"""Keep Streamlit's collection after every script run cheap: freeze what the process loaded.

Streamlit runs a full gc.collect() after each run, on the script thread and holding the GIL
(0.1-0.25 s on this app's ~110k long-lived objects), so the websocket could not send the next
work until it ended (issue 11). Modules, caches and the engine live as long as the process;
gc.freeze() moves them out of the collector's sight, and each collection then only scans what
the runs created. Frozen again whenever a page has imported new modules.
"""

from __future__ import annotations

import gc
import sys

_modules_seen = 0


def freeze_loaded() -> None:
    """Freeze the heap once more if modules were imported since the last freeze (rare)."""
    global _modules_seen
    if len(sys.modules) != _modules_seen:
        gc.collect()  # what is garbage now must not be frozen for good
        gc.freeze()
        _modules_seen = len(sys.modules)
