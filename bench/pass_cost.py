"""The CPU cost of one driver reconcile pass, in-process, without a cluster.

Every reconcile pass the operator runs (one per coalesced burst of watch events: a
node relabelled, a DaemonSet's status moving, the policy's own status write coming
back) plans and renders *all* driver manifests from the in-memory view, then
compares their hashes with what was applied. This times the pure part of that pass,
`desired.driver_manifests.desired_driver_manifests` (the same function the
operator calls), split into

- ``plan``: node facts -> GpuNode records -> `planning.drivers.driver_plan.plan_driver_daemonsets`;
- ``render``: `desired.driver_manifests.render_driver_state` (Jinja2, then YAML parsing, twice:
  once for the config digest, once with it). It keeps its last result: a pass that renders
  what the previous pass rendered (the usual case: a node joined a version, a status moved)
  costs a comparison. ``render ms`` is that warm case, the operator's pass too;
  ``cold ms`` is a render after something changed (a new version, a policy edit);
- ``hash``: `kube.applying.applied_hash` of every manifest (what decides "no write"),

for N GPU nodes spread over D driver DaemonSets (one RHCOS build each). On a two-core
machine shared with the control plane, a pass that costs hundreds of milliseconds is
latency every event waits for: the end-to-end numbers of ``drivers_at_scale.py`` sit
on top of this.

It imports ``ocp_gpu`` from wherever the venv does (the working tree, editable), so
it measures uncommitted changes too: a fast loop for checking a fix. Seconds to run.

Run: ``.venv/bin/python bench/pass_cost.py [--nodes 1000 5000] [--daemonsets 1 21]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from ocp_gpu.desired import driver_manifests
from ocp_gpu.kube import applying, reading
from ocp_gpu.model import apis, driver_snapshot, releases
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_plan, dtk_images
from ocp_gpu.rendering.operands import driver_rendering
from ocp_gpu_harness import nodes as fake_nodes

NAMESPACE: Final = "nvidia-gpu-operator"
V1: Final = fake_nodes.DEFAULT_RHCOS
DTK_IMAGE: Final = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
OPENSHIFT: Final = platforms.detect_platform({apis.CONFIG_GROUP, apis.IMAGE_GROUP})

T = TypeVar("T")


def version(i: int) -> str:
    """V1 for i == 0, else the i-th made-up RHCOS 4.16 build."""
    return V1 if i == 0 else f"416.94.20240801{i:04d}-0"


def imagestream(versions: Sequence[str]) -> dict[str, Any]:
    """openshift/driver-toolkit with one tag per version, as the API returns it."""
    images = {v: DTK_IMAGE + f"{i:064x}" for i, v in enumerate(versions)}
    return {
        "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
        "spec": {
            "tags": [{"name": v, "from": {"kind": "DockerImage", "name": i}} for v, i in images.items()]
        },
        "status": {
            "tags": [
                {"tag": v, "items": [{"dockerImageReference": i, "image": i.split("@")[1]}]}
                for v, i in images.items()
            ]
        },
    }


def view(count: int, daemonsets: int) -> driver_manifests.DriverView:
    """N GPU nodes: one on each of D-1 fresh builds, the rest on V1 (as in drivers_at_scale)."""
    versions = [version(i) for i in range(daemonsets)]
    facts = []
    for n in range(count):
        rhcos = versions[n] if 0 < n < daemonsets else V1
        body = fake_nodes.gpu_node(f"gpu-{n:05d}", rhcos=rhcos)
        # The operator has labelled its GPU nodes by the time it runs passes like these.
        body["metadata"]["labels"].update(
            {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true"}
        )
        facts.append(reading.node_facts(body))
    return driver_manifests.DriverView(
        namespace=NAMESPACE,
        env=dict(releases.RELEASE_IMAGES),
        node_facts=tuple(facts),
        dtk_imagestream=imagestream(versions),
        cluster_version={"status": {"desired": {"version": "4.16.3"}}},
        cluster_proxy={"spec": {}, "status": {}},
    )


def timed(call: Callable[[], T], repeat: int) -> tuple[T, float]:
    """The result of ``call`` and its median wall time over ``repeat`` runs, in seconds."""
    times = []
    result: T | None = None
    for _ in range(repeat):
        began = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - began)
    assert result is not None
    return result, statistics.median(times)


def measure(count: int, daemonsets: int, repeat: int) -> dict[str, float]:
    policy = policy_parser.parse_policy({})
    v = view(count, daemonsets)
    whole, total = timed(lambda: driver_manifests.desired_driver_manifests(policy, OPENSHIFT, v), repeat)
    assert isinstance(whole, driver_manifests.DriverManifests)
    settings = whole.settings
    stream = dtk_images.resolve_driver_toolkit_stream(reading.image_stream_singleton(v.dtk_imagestream))

    def plan() -> driver_plan.DriverPlan:
        gpu = tuple(driver_snapshot.GpuNode.from_facts(f) for f in v.node_facts if f.is_gpu_node)
        return driver_plan.plan_driver_daemonsets(
            driver_snapshot.DriverSnapshot(nodes=gpu, daemonsets=(), stream=stream), settings
        )

    planned, plan_s = timed(plan, repeat)
    inputs = driver_rendering.DriverRenderInputs(
        namespace=NAMESPACE, openshift=True, manager_image=releases.RELEASE_IMAGES["DRIVER_MANAGER_IMAGE"]
    )
    manifests, render_s = timed(
        lambda: driver_manifests.render_driver_state(planned.desired, policy, inputs), repeat
    )

    def cold() -> list[dict[str, object]]:
        driver_manifests.clear()  # forget the last render: what a changed pass pays
        return driver_manifests.render_driver_state(planned.desired, policy, inputs)

    _, cold_s = timed(cold, repeat)
    _, hash_s = timed(lambda: [applying.applied_hash(m) for m in manifests], repeat)
    return {
        "pass_ms": total * 1000,
        "plan_ms": plan_s * 1000,
        "render_ms": render_s * 1000,
        "cold_ms": cold_s * 1000,
        "hash_ms": hash_s * 1000,
        "manifests": len(manifests),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--daemonsets", type=int, nargs="+", default=[1, 2, 11, 21])
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell; the median is shown")
    args = parser.parse_args(argv)
    print(
        f"{'nodes':>6} {'DSs':>4} {'pass ms':>9} {'plan ms':>9} {'render ms':>10} {'cold ms':>8} "
        f"{'hash ms':>8} manifests"
    )
    for count in args.nodes:
        for daemonsets in args.daemonsets:
            if daemonsets > count:
                continue
            row = measure(count, daemonsets, args.repeat)
            print(
                f"{count:>6} {daemonsets:>4} {row['pass_ms']:>9.1f} {row['plan_ms']:>9.1f} "
                f"{row['render_ms']:>10.1f} {row['cold_ms']:>8.1f} {row['hash_ms']:>8.2f} "
                f"{row['manifests']:>9.0f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
