"""The operand and operator-monitoring manifests of the last pass, kept read-only with their hashes.

Every reconcile pass renders every operand (the disabled ones too: what they would render is
what to delete) and the operator's monitoring objects, then hashes each manifest to decide
"no write".  At start-up a pass runs every time an operand pod moves (hundreds of times at
100 nodes), and almost every one renders exactly what the previous did: a deep copy of each
operand's manifests, the monitoring templates (Jinja2 + YAML) and a JSON digest per manifest
were most of such a pass (issue 13, py-spy).  Here each is done once per change of what it
is rendered from, and the pass gets the kept manifests with their applied hashes.

NB: the manifests are shared by every later pass: callers must treat them as read-only
(kube/applying.owned copies before adding ownership).  The pure rendering is rendering/;
this module only remembers its results (rendering/ keeps no state of its own for them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ocp_gpu.kube import applying
from ocp_gpu.model import operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering import monitoring_rendering, templating
from ocp_gpu.rendering.operands import operand_common, operand_rendering


@dataclasses.dataclass(frozen=True)
class Rendered:
    """One manifest as rendered (read-only) and its applied hash (kube/applying.applied_hash)."""

    manifest: Mapping[str, Any]
    applied_hash: str


# One slot per operand name (and MONITORING): what it was rendered from, and the result.
# NB: compared by equality: the policy holds dicts, so it cannot be a dict key.
_last: dict[str, tuple[object, tuple[Rendered, ...]]] = {}
MONITORING = "operator-monitoring"


def clear() -> None:
    """Forget every kept rendering (tests)."""
    _last.clear()


def _kept(slot: str, key: object, render: Any) -> tuple[Rendered, ...]:
    last = _last.get(slot)
    if last is None or last[0] != key:
        manifests = render()
        last = (key, tuple(Rendered(manifest, applying.applied_hash(manifest)) for manifest in manifests))
        _last[slot] = last
    return last[1]


def operand_manifests(
    operand: operand_types.Operand, policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs
) -> tuple[Rendered, ...]:
    """`rendering.operands.operand_rendering.render_operand`, rendered again only when its inputs changed."""
    key = (policy, inputs, templating.templates_dir())
    return _kept(operand.name, key, lambda: operand_rendering.render_operand(operand, policy, inputs))


def monitoring_manifests(
    policy: policy_spec.Policy, inputs: monitoring_rendering.MonitoringRenderInputs
) -> tuple[Rendered, ...]:
    """`rendering.monitoring_rendering.render_monitoring_state`, rendered again only when its inputs
    changed."""
    key = (policy, inputs, templating.templates_dir())
    return _kept(MONITORING, key, lambda: monitoring_rendering.render_monitoring_state(policy, inputs))
