"""Client-side components (Streamlit components v2) whose JS and CSS are files in assets/.

Streamlit serves a v2 component's files from an asset directory declared for an installed
distribution (`[tool.streamlit.component]` in its pyproject.toml). That directory is resolved
inside the import package named like the distribution, here `labeling/`, which must not hold
UI code. So this package declares its own asset directory to the running Streamlit with the
same manifest objects Streamlit builds from a pyproject declaration (`register_from_manifest`),
on every runtime that mounts a component (the server's, and each AppTest's). The files are then
served under /_stcore/bidi-components/<name>/<file>, cached by the browser like any asset.
Streamlit is pinned to 1.67 (pyproject.toml); tests mount both components, so an API change
there fails them loudly.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.components.v2.manifest_scanner import ComponentConfig, ComponentManifest

ASSETS = Path(__file__).parent / "assets"
PROJECT = "labeling"
COMPONENTS = ("label_form", "adjudicate_form", "session_cookie")


# Sessions run their scripts on threads of one server: two opened at once both mount. The
# manifest registers its components one after another, so without the lock a second session
# could see the first component declared, skip, and mount one not yet declared (seen: "must
# be declared in pyproject.toml with asset_dir" when two sessions started together).
_DECLARING = threading.Lock()


def _declare(manager: Any) -> None:
    """Tell a component manager where this package's assets live (once per manager)."""
    with _DECLARING:
        if all(manager.get_component_asset_root(f"{PROJECT}.{c}") for c in COMPONENTS):
            return
        manifest = ComponentManifest(
            name=PROJECT, version="1",
            components=[ComponentConfig(name=c, asset_dir=ASSETS.name) for c in COMPONENTS],
        )  # fmt: skip
        manager.register_from_manifest(manifest, ASSETS.parent)


def _active_manager() -> Any:
    from streamlit.components.v2.get_bidi_component_manager import get_bidi_component_manager

    return get_bidi_component_manager()


def component(name: str) -> Any:
    """The mount function of one component: assets/<name>.js and assets/<name>.css."""
    renderer: list[Any] = []

    def mount(**kwargs: Any) -> Any:
        _declare(_active_manager())  # a new runtime (AppTest makes one per test) needs it too
        if not renderer:  # registered on first use, inside a script run
            renderer.append(
                st.components.v2.component(
                    f"{PROJECT}.{name}", js=f"{name}.js", css=f"{name}.css", isolate_styles=False
                )
            )
        return renderer[0](**kwargs)

    return mount
