"""The client-side components' assets are declared to Streamlit before any session mounts one."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from streamlit.components.v2.component_manager import BidiComponentManager

from ui import components


class _SlowManager(BidiComponentManager):
    """A manager that declares a manifest's components one by one, slowly (as under load)."""

    def __init__(self) -> None:
        super().__init__()
        self.first_declared = threading.Event()

    def register_from_manifest(self, manifest: Any, package_root: Path) -> None:
        for config in manifest.components:
            one = type(manifest)(name=manifest.name, version=manifest.version, components=[config])
            super().register_from_manifest(one, package_root)
            self.first_declared.set()
            time.sleep(0.05)


def test_sessions_mounting_at_once_each_find_every_component_declared() -> None:
    """The first session is declaring; the others mount while it is half-way through."""
    manager = _SlowManager()
    missing: list[str] = []

    def session(first: bool) -> None:
        if not first:
            manager.first_declared.wait(timeout=10)
        components._declare(manager)
        for name in components.COMPONENTS:  # what mounting it next needs
            if manager.get_component_asset_root(f"{components.PROJECT}.{name}") is None:
                missing.append(name)

    threads = [threading.Thread(target=session, args=(i == 0,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not missing
    root = manager.get_component_asset_root(f"{components.PROJECT}.label_form")
    assert root is not None and (root / "label_form.js").is_file()
