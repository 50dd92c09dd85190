"""Which GPU nodes the driver DaemonSets actually select, and which GPU nodes none does.

Decides, from the nodes' labels and the planned driver DaemonSets: how many nodes
each DaemonSet selects (its pods go only where `nvidia.com/gpu.deploy.driver=true`,
so an admin's opt-out is not counted), and which GPU nodes want a driver but are
selected by no DaemonSet (a missing NFD label, a DaemonSet that cannot be rendered).
The ClusterPolicy is never `ready` while such a node exists (DESIGN §4).  Shared by
the status (reconcilers/cluster.py) and `ocp-gpu render`, so both count alike.

Pure: never reads or writes a Node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from ocp_gpu.model import labels
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.planning.drivers import driver_findings, driver_plan
from ocp_gpu.planning.operands import node_labels

# How many node names a message quotes before "+N more" (a 5,000-node list helps nobody).
NODES_QUOTED = 10


@dataclasses.dataclass(frozen=True)
class DriverCoverage:
    # DaemonSet name -> the nodes it selects (opted-out nodes left out).
    selected: Mapping[str, tuple[NodeName, ...]]
    # GPU nodes that want a driver and that no planned DaemonSet selects, sorted.
    uncovered: tuple[NodeName, ...]


def wants_driver(node: Mapping[str, str]) -> bool:
    """A GPU node the driver DaemonSets should select once the operator has labelled it.

    NB: not the label as it is now: a new node gets `gpu.deploy.driver=true` in the same
    pass; only an admin's `false` (or `gpu.deploy.operands=false`) keeps the driver off.
    """
    return (
        node_labels.is_gpu_node(node)
        and node.get(labels.DRIVER_DEPLOY_LABEL) != node_labels.FALSE
        and node.get(labels.GPU_DEPLOY_OPERANDS) != node_labels.FALSE
        # a node moved to a VM stack runs no driver (its GPUs are vfio-pci's)
        and not labels.runs_vm_stack(node)
    )


def plan_driver_coverage(
    nodes: Mapping[NodeName, Mapping[str, str]], desired: Iterable[driver_plan.DesiredDriverDaemonSet]
) -> DriverCoverage:
    """Per DaemonSet the nodes it selects; the GPU nodes no DaemonSet selects."""
    selected: dict[str, tuple[NodeName, ...]] = {}
    covered: set[NodeName] = set()
    for entry in desired:
        # the key's nodes, less those the admin opted out of the driver
        mine = tuple(name for name in entry.nodes if wants_driver(nodes.get(name, {})))
        selected[entry.name] = mine
        covered.update(entry.nodes)
    uncovered = sorted(name for name, node in nodes.items() if wants_driver(node) and name not in covered)
    return DriverCoverage(selected=selected, uncovered=tuple(uncovered))


def describe_uncovered(uncovered: tuple[NodeName, ...], findings: Iterable[driver_findings.Finding]) -> str:
    """One message naming the nodes without a driver DaemonSet and what each lacks."""
    missing = {
        finding.node: finding.missing
        for finding in findings
        if isinstance(finding, driver_findings.NodeMissingKeyLabels)
    }
    quoted = []
    for name in uncovered[:NODES_QUOTED]:
        if name in missing:
            # the node cannot be keyed: name the NFD labels it lacks
            quoted.append(f"{name} (lacks {', '.join(missing[name])})")
        else:
            # keyed, but its key's DaemonSet cannot be rendered this pass (see the other conditions)
            quoted.append(f"{name} (its driver DaemonSet cannot be rendered)")
    more = f", +{len(uncovered) - NODES_QUOTED} more" if len(uncovered) > NODES_QUOTED else ""
    return (
        f"{len(uncovered)} GPU node(s) have no driver DaemonSet selecting them: {', '.join(quoted)}{more}; "
        "fix: run NFD so the nodes carry the labels, or opt a node out with "
        f"{labels.deploy_label('driver')}=false"
    )
