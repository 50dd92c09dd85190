"""Hostile strings in rendered manifests: put back the benign text each one stands for."""

from __future__ import annotations

from typing import Any


def swapped(value: Any, mapping: dict[str, str], seen: set[str]) -> Any:
    """`value` (a manifest, or any part of one) with each hostile text of `mapping` replaced by
    its benign text, in keys and values alike; every hostile text found is added to `seen`."""
    if isinstance(value, str):
        for hostile_text, benign in mapping.items():
            if hostile_text in value:
                seen.add(hostile_text)
                value = value.replace(hostile_text, benign)
        return value
    if isinstance(value, dict):
        return {swapped(k, mapping, seen): swapped(v, mapping, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [swapped(item, mapping, seen) for item in value]
    return value
