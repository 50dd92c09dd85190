"""Watch events without `metadata.managedFields`, dropped as kopf decodes each event line.

NB: kopf decodes every watch event into a full object and queues it per object until its
worker runs.  In a start-up burst (the initial lists, then an event for every node the first
pass labels) hundreds of events wait at once: at 100 nodes 20 MiB of decoded JSON
(bench/memory_profile.py, tracemalloc at the peak: kopf/_cogs/clients/api.py's json.loads).
CPython keeps the arenas such a burst used for the life of the process whenever a
long-lived object landed in them, so the burst's peak becomes the idle RSS.  managedFields
(the server-side apply bookkeeping of every field manager) is a large part of each object
and nothing in ocp-gpu or kopf reads it: dropping it at decode time frees it at once
instead of holding it in the queues.  (Nodes, our DaemonSets and the operand pods do not come
through kopf: their own watches, kube/watching.py, cut managedFields from the raw bytes.)
"""

from __future__ import annotations

import json
import types
from typing import Any

from kopf._cogs.clients import api as kopf_api


def _loads(text: str | bytes) -> Any:
    event = json.loads(text)
    if isinstance(event, dict):
        obj = event.get("object")
        if isinstance(obj, dict):
            metadata = obj.get("metadata")
            if isinstance(metadata, dict):
                metadata.pop("managedFields", None)
    return event


def install() -> bool:
    """Make kopf's watch streams decode through `_loads`; False if this kopf decodes elsewhere."""
    if getattr(kopf_api, "json", None) is not json:
        return False
    # NB: only the name `json` of kopf's api module: its streams' one `json.loads` per line.
    kopf_api.json = types.SimpleNamespace(loads=_loads)  # type: ignore[assignment,attr-defined]
    return True
