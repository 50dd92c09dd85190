"""The OLM bundle and file-based catalog built from the install source (used by hack/generate.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

TARGETS: dict[str, Callable[[Path], str]] = {}
