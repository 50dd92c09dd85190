"""An in-process copy of one kind of object, kept by a LIST and then a WATCH (test infrastructure).

The simulated node agent (node_agent.py) used to LIST every operand pod, DaemonSet and GPU
node on each pass: at 5,000 nodes that is 15,000 pods, about a hundred megabytes of JSON
that the apiserver encoded and the agent decoded every few seconds, and the simulation, not
the operator, set the pace of the benchmark (2026-11-24: 8,070 of 15,000 pods Ready after 27
minutes). A `Mirror` lists once (in pages) and then follows a watch, so a pass reads memory
and each change costs one event.

Each object is kept trimmed (``trim``: the fields its reader uses), keyed by namespace/name.
A watch that ends is resumed from the last resourceVersion seen (bookmarks keep it fresh); a
410 Gone or any error lists again, after a short pause, so a restarted apiserver is followed.
Every change to what ``trim`` keeps sets ``changed``, the event the agent's loop waits on.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes.watch.watch import iter_resp_lines

logger = logging.getLogger("ocp_gpu_harness.mirror")

# Objects per LIST page: the apiserver never encodes, nor the agent decodes, the whole list at once.
PAGE: Final = 500
# Seconds the apiserver keeps a watch open (then it is resumed from the last resourceVersion).
WATCH_SECONDS: Final = 50
# (connect, read) seconds: the read timeout outlasts the watch, which sends bookmarks meanwhile.
WATCH_TIMEOUT: Final = (10.0, WATCH_SECONDS + 30.0)
LIST_TIMEOUT: Final = (10.0, 120.0)
# Seconds to wait before listing again after a failure (the apiserver restarting, a 410 Gone).
RETRY_PAUSE: Final = 0.5

Trim = Callable[[Mapping[str, Any]], dict[str, Any]]


class Mirror:
    """One kind of object (a list call of the kubernetes client and its keyword arguments)."""

    def __init__(
        self,
        name: str,
        list_call: Callable[..., Any],
        trim: Trim,
        changed: threading.Event,
        stop: threading.Event,
        **selector: str,
    ) -> None:
        self.name = name
        self._list_call = list_call
        self._trim = trim
        self._changed = changed
        self._stop = stop
        self._selector = selector
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Any]] = {}
        # Set once the first LIST is in: before it, an empty mirror would mean "nothing exists".
        self.synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mirror-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def items(self) -> list[dict[str, Any]]:
        """The objects as last seen (each replaced whole on a change, never mutated: safe to read)."""
        with self._lock:
            return list(self._items.values())

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(f"{namespace}/{name}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                version = self._list()
                while not self._stop.is_set():
                    version = self._watch(version)
            except Exception as error:  # a failed LIST or watch: list again (a 410 Gone lands here too)
                logger.info("mirror %s: %s; listing again", self.name, error)
            self._stop.wait(RETRY_PAUSE)

    def _list(self) -> str:
        items: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE, **self._selector}
            if token:
                kwargs["_continue"] = token
            answer = self._list_call(_preload_content=False, _request_timeout=LIST_TIMEOUT, **kwargs)
            page = json.loads(answer.data)
            for obj in page.get("items") or ():
                items[_key(obj)] = self._trim(obj)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                version = str((page.get("metadata") or {}).get("resourceVersion", ""))
                break
        with self._lock:
            self._items = items
        self.synced.set()
        self._changed.set()
        return version

    def _watch(self, version: str) -> str:
        """One watch from ``version`` until the apiserver ends it; returns the last version seen."""
        answer = self._list_call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=WATCH_TIMEOUT,
            **self._selector,
        )
        try:
            for line in iter_resp_lines(answer):
                if self._stop.is_set():
                    break
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    # Most often 410 Gone: the version is too old; the caller lists again.
                    raise RuntimeError(f"watch error: {obj.get('message', obj)}")
                version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                if kind == "BOOKMARK":
                    continue
                key = _key(obj)
                with self._lock:
                    if kind == "DELETED":
                        self._items.pop(key, None)
                        moved = True
                    else:
                        trimmed = self._trim(obj)
                        moved = not _same_but_version(self._items.get(key), trimmed)
                        self._items[key] = trimmed
                # NB: a change outside what the reader keeps (kwok's node heartbeats, a pod's IPs)
                # wakes nobody: at 5,000 nodes heartbeats alone made a pass over 15,000 pods
                # several times a second (9.8 s of the agent's CPU in a 120 s steady window).
                if moved:
                    self._changed.set()
        finally:
            answer.release_conn()
        return version


def _same_but_version(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """The trimmed objects differ in their resourceVersion at most."""
    if old is None:
        return False
    old_metadata = {k: v for k, v in (old.get("metadata") or {}).items() if k != "resourceVersion"}
    new_metadata = {k: v for k, v in (new.get("metadata") or {}).items() if k != "resourceVersion"}
    return old_metadata == new_metadata and {k: v for k, v in old.items() if k != "metadata"} == {
        k: v for k, v in new.items() if k != "metadata"
    }


def _key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
