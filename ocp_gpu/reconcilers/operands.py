"""Applying rendered operand manifests, and the operands other than the driver.

`apply_if_changed` is how every rendered manifest reaches the cluster: server-side
apply, skipped when the applied-hash annotation (DaemonSets, seen by the watch) or
this process's memory (other kinds) says the object is already as rendered.  So a
quiet cluster sees no writes, and a restarted operator re-applies only what changed.

The container toolkit (state-container-toolkit) is the first operand after the driver:
one DaemonSet on every node labelled `nvidia.com/gpu.deploy.container-toolkit=true`,
updated as `spec.daemonsets.updateStrategy` says (planning/operands.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from ocp_gpu.kube import applying, requesting
from ocp_gpu.model import images
from ocp_gpu.model import policy as policy_model
from ocp_gpu.model.problems import PolicyProblem
from ocp_gpu.planning import platform as platform_model
from ocp_gpu.reconcilers import runtime
from ocp_gpu.rendering import toolkit as toolkit_rendering

logger = logging.getLogger("ocp_gpu.operands")


@dataclasses.dataclass(frozen=True)
class OperandOutcome:
    """What the status reports about one operand after a pass."""

    enabled: bool
    problem: PolicyProblem | None = None
    # Objects that could not be applied or deleted, with the error.
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)


async def apply_if_changed(
    rt: runtime.Runtime, owner: Mapping[str, str], manifest: Mapping[str, Any], errors: dict[str, str]
) -> None:
    """Server-side apply `manifest` unless it is already applied as rendered; errors go to `errors`."""
    metadata = manifest["metadata"]
    ident = (manifest["kind"], str(metadata.get("namespace", "")), str(metadata["name"]))
    wanted = applying.applied_hash(manifest)
    if manifest["kind"] == "DaemonSet":
        existing = rt.driver_daemonsets.get(ident[2]) or rt.operand_daemonsets.get(ident[2])
        current = existing.annotations.get(applying.APPLIED_HASH) if existing else None
    else:
        current = rt.applied.get(ident)
    if current == wanted:
        # Already applied as rendered: no write.
        return
    try:
        await asyncio.to_thread(applying.apply, rt.api_client, applying.owned(manifest, owner))
        rt.applied[ident] = wanted
        logger.info("applied %s %s/%s", *ident)
    except Exception as error:  # per object: one failure never blocks the others
        errors[f"{ident[0]} {ident[2]}"] = requesting.describe_error(error)
        logger.warning("could not apply %s %s: %s", ident[0], ident[2], error)


async def reconcile_toolkit(
    rt: runtime.Runtime,
    owner: Mapping[str, str],
    policy: policy_model.Policy,
    platform: platform_model.Platform,
) -> OperandOutcome:
    errors: dict[str, str] = {}
    if not policy.toolkit.enabled:
        # toolkit.enabled: false (e.g. the toolkit is part of the host image): remove our DaemonSet.
        if toolkit_rendering.DAEMONSET in rt.operand_daemonsets:
            await delete_daemonset(rt, toolkit_rendering.DAEMONSET, errors)
        return OperandOutcome(enabled=False, errors=errors)
    image = images.resolve_image(policy.toolkit.image, component="toolkit", env=rt.env)
    if isinstance(image, PolicyProblem):
        # NB: nothing is applied or deleted: a running toolkit keeps running.
        return OperandOutcome(enabled=True, problem=image)
    inputs = toolkit_rendering.ToolkitRenderInputs(rt.namespace, platform.is_openshift, image)
    for manifest in toolkit_rendering.render_toolkit_state(policy, inputs):
        await apply_if_changed(rt, owner, manifest, errors)
    return OperandOutcome(enabled=True, errors=errors)


def toolkit_unready(rt: runtime.Runtime) -> bool:
    """The toolkit DaemonSet is missing, or not every pod it wants is Ready."""
    observed = rt.operand_daemonsets.get(toolkit_rendering.DAEMONSET)
    return not (
        observed is not None
        and observed.status_is_current
        and observed.number_ready == observed.desired_number_scheduled
    )


async def delete_daemonset(rt: runtime.Runtime, name: str, errors: dict[str, str]) -> None:
    """Delete one of our DaemonSets in the operand namespace; a failure goes to `errors`."""
    try:
        await asyncio.to_thread(applying.delete, rt.api_client, "apps/v1", "DaemonSet", name, rt.namespace)
        logger.info("deleted DaemonSet %s", name)
    except Exception as error:
        errors[f"DaemonSet {name}"] = requesting.describe_error(error)
