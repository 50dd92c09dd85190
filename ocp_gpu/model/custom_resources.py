"""Our custom resources as the API holds them: metadata, the spec as written, the last status.

A ClusterPolicy is read into one record, `PolicyObject`, by the watch (kube/object_watches.py),
`ocp-gpu status` and `ocp-gpu render` alike (kube/reading.cluster_policy converts the JSON);
an NVIDIADriver into model/nvidia_driver.NvidiaDriver, the same record with its pool's
properties.  What a spec means once parsed is model/policy/policy_spec.py's.  Pure data: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ocp_gpu.model import apis


@dataclasses.dataclass(frozen=True)
class Condition:
    """One entry of status.conditions, as written."""

    type: str
    status: str
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class CustomResource:
    """A ClusterPolicy or an NVIDIADriver as last read (a watch event, a LIST, a file)."""

    # metadata.name; "" when a file's object has none.
    name: str
    # metadata.uid; "" when unknown (a file without it).
    uid: str
    # metadata.creationTimestamp, RFC 3339: sorts chronologically (the oldest policy is active).
    created: str
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def is_same_but_status(self, other: CustomResource) -> bool:
        """The same object with the same spec: at most its status differs (e.g. our own status write)."""
        return (self.name, self.uid, self.created, self.generation, self.spec) == (
            other.name,
            other.uid,
            other.created,
            other.generation,
            other.spec,
        )

    @property
    def observed_generation(self) -> int:
        """status.observedGeneration; 0 when the operator never wrote a status."""
        return int(self.status.get("observedGeneration", 0))

    @property
    def state(self) -> str:
        """status.state (ready, notReady, ignored); "" without a status."""
        return str(self.status.get("state", ""))

    @property
    def namespace(self) -> str:
        """status.namespace: where the operator runs the operands; "" without a status."""
        return str(self.status.get("namespace", ""))

    @property
    def conditions(self) -> tuple[Condition, ...]:
        return tuple(
            Condition(
                type=str(c.get("type", "")),
                status=str(c.get("status", "")),
                reason=str(c.get("reason", "")),
                message=str(c.get("message", "")),
            )
            for c in self.status.get("conditions") or ()
        )


@dataclasses.dataclass(frozen=True)
class PolicyObject(CustomResource):
    """A ClusterPolicy."""

    def ref(self) -> dict[str, str]:
        """The object reference Events and ownerReferences name."""
        return policy_ref(self.name, self.uid)


@dataclasses.dataclass(frozen=True)
class GpuClusterObject(CustomResource):
    """NVIDIA's GPUCluster (model/policy/gpu_cluster.py maps its spec onto the DRA operand)."""

    def ref(self) -> dict[str, str]:
        """The object reference Events name."""
        return {
            "apiVersion": apis.GPU_CLUSTER_API_VERSION,
            "kind": apis.GPU_CLUSTER_KIND,
            "name": self.name,
            "uid": self.uid,
        }


def policy_ref(name: str, uid: str) -> dict[str, str]:
    """The reference to ClusterPolicy `name` that Events and ownerReferences carry."""
    return {"apiVersion": apis.POLICY_API_VERSION, "kind": apis.POLICY_KIND, "name": name, "uid": uid}
