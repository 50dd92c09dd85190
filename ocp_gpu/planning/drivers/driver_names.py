"""Driver DaemonSet names and key label values: stable, valid and distinct for every key.

Pure functions of the key, so names never depend on input order or on a pass.
"""

from __future__ import annotations

import hashlib
import re

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverKey

# --- names and label values ---------------------------------------------------

_NAME_PREFIX = labels.DRIVER_DAEMONSET_PREFIX
_MAX_NAME = 63
_HASH_LENGTH = 8
_MAX_LABEL_VALUE = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]


def _dns_subdomain(text: str) -> str:
    """Lowercase, only [a-z0-9.-], every dot-separated part starting and ending alphanumeric."""
    text = re.sub(r"[^a-z0-9.-]", "-", text.lower())
    parts = (part.strip("-") for part in text.split("."))
    return ".".join(part for part in parts if part)


def daemonset_name(key: DriverKey) -> str:
    """`nvidia-driver-daemonset-<key>`, a valid DNS-1123 name of at most 63 characters.

    A pure function of the key, so names are stable across passes and input order.
    When the name would be too long, it is cut and the first 8 hex digits of the full
    key's sha256 are appended, so two long keys sharing a prefix still differ.
    """
    body = _dns_subdomain(key) or "unknown"
    if len(_NAME_PREFIX) + len(body) <= _MAX_NAME:
        # the common case: RHCOS builds, OS tags and most kernel + OS keys fit
        return _NAME_PREFIX + body
    # too long: cut at a clean boundary and add the hash of the full key
    return hashed_name(key, key)


def hashed_name(key: str, hashed: str) -> str:
    """The name for `key`, cut to leave room for `-<8 hex digits of sha256(hashed)>`."""
    room = _MAX_NAME - len(_NAME_PREFIX) - 1 - _HASH_LENGTH
    cut = _dns_subdomain(key)[:room].rstrip(".-")
    return f"{_NAME_PREFIX}{cut}-{_short_hash(hashed)}" if cut else f"{_NAME_PREFIX}{_short_hash(hashed)}"


def key_label_value(key: DriverKey) -> str:
    """The `ocp-gpu.io/driver-key` label value: the key itself when it is a valid label value.

    Keys come from NFD label values, so they almost always are; otherwise the value is
    sanitised, cut and suffixed with a hash of the full key (stable, distinct).
    """
    if len(key) <= _MAX_LABEL_VALUE and _LABEL_VALUE.match(key):
        return key
    room = _MAX_LABEL_VALUE - 1 - _HASH_LENGTH
    cut = re.sub(r"[^A-Za-z0-9_.-]", "-", key)[:room].strip("-_.")
    return f"{cut}-{_short_hash(key)}" if cut else _short_hash(key)
