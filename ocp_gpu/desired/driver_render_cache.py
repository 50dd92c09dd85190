"""The driver manifests of the last few passes, kept: only a changed driver key is rendered again.

Every reconcile pass renders, and rendering (Jinja2, then YAML parsing, twice per DaemonSet
for its digest) is most of a pass's CPU.  Most passes render what the previous one did (a
node joined a version, a status moved); a node on a new RHCOS version adds one desired entry,
and only that DaemonSet is rendered, so its creation does not wait for the others'.  One
cache per context (policy, inputs, templates), the most recent few: the ClusterPolicy's and
each NVIDIADriver pool's.  The pure rendering is `rendering/driver_rendering.py`; this module only
remembers its results (kept out of rendering/, which holds no state).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.drivers.driver_plan import DesiredDriverDaemonSet
from ocp_gpu.rendering import driver_rendering, templating

CACHED_CONTEXTS: Final = 4


@dataclasses.dataclass
class _Cache:
    # (policy, inputs, templates directory) the cached manifests were rendered for.
    context: object
    # Per shared template file: its manifests.
    shared: dict[str, list[dict[str, Any]]]
    # Per DaemonSet name: the entry it was rendered from (nodes left out) and its manifests.
    daemonsets: dict[str, tuple[DesiredDriverDaemonSet, list[dict[str, Any]]]] = dataclasses.field(
        default_factory=dict
    )


_caches: list[_Cache] = []


def clear() -> None:
    """Forget every cached rendering (benchmarks time a cold render with it)."""
    _caches.clear()


def render_driver_state(
    desired: Sequence[DesiredDriverDaemonSet],
    policy: policy_spec.Policy,
    inputs: driver_rendering.DriverRenderInputs,
) -> list[dict[str, Any]]:
    """`rendering.driver_rendering.render_driver_state`, rendering only the DaemonSets not kept from before.

    The manifests are shared with later calls: treat them as read-only (kube/applying.owned copies).
    """
    context = (policy, inputs, templating.templates_dir())
    cache = next((c for c in _caches if c.context == context), None)
    if cache is None:
        cache = _Cache(context=context, shared=driver_rendering.render_shared(policy, inputs))
    else:
        _caches.remove(cache)
    _caches.append(cache)
    del _caches[:-CACHED_CONTEXTS]
    kept: dict[str, tuple[DesiredDriverDaemonSet, list[dict[str, Any]]]] = {}
    for entry in desired:
        # Which nodes a key has does not change its manifests (pods select nodes by label).
        bare = dataclasses.replace(entry, nodes=(), exists=False)
        cached = cache.daemonsets.get(entry.name)
        if cached is None or cached[0] != bare:
            cached = (bare, driver_rendering.render_daemonset(entry, policy, inputs))
        kept[entry.name] = cached
    # Only the current keys stay cached: a key whose nodes all left is forgotten.
    cache.daemonsets = kept
    return driver_rendering.assemble(cache.shared, [kept[entry.name][1] for entry in desired])
