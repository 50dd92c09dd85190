"""`ocp-gpu crds apply|delete`: install or remove the CRDs this release ships, for Helm's hooks.

Helm installs a chart's `crds/` once and never upgrades or deletes them.  The Helm chart runs
this command from the operator image, as NVIDIA's chart runs its `manage-crds`:

- `apply` (the pre-upgrade hook Job, `operator.upgradeCRD`): server-side applies every CRD the
  package carries of group nvidia.com (ocp_gpu/crds/: ClusterPolicy, NVIDIADriver, GPUCluster; the
  chart's crds/ are copies),
  then waits until each is Established, so the upgraded operator and ClusterPolicy meet the new
  schema;
- `delete` (the post-delete hook Job, `operator.cleanupCRD`): deletes them and waits until they
  are gone.  NB: deleting a CRD deletes every object of it (each ClusterPolicy, NVIDIADriver and
  GPUCluster).

Usage::

    ocp-gpu crds apply|delete [--kubeconfig PATH] [--timeout SECONDS]

Exit status: 0 done; 1 the cluster refused or the CRDs did not settle in time (the message
names the CRD and why); 2 a bad command line.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.kube import applying, clients, requesting

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"
EXIT_DONE, EXIT_FAILED = 0, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("apply", "delete"), help="apply (upgrade) or delete (cleanup)")
    parser.add_argument(
        "--kubeconfig", type=Path, default=None, help="default: $KUBECONFIG, in-cluster, or ~/.kube/config"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the CRDs to settle (default 120)"
    )


# The group of the CRDs the hooks manage.  NB: not NVIDIA's DRA driver's resource.nvidia.com
# (ComputeDomain, ComputeDomainClique), which the chart's crds/ install once: their objects are
# workloads', and NVIDIA's own hooks leave them alone too (manage-crds names only the nvidia.com ones).
HOOK_GROUP = "nvidia.com"


def shipped_crds() -> list[dict[str, Any]]:
    """The CRDs of group nvidia.com this package carries (ocp_gpu/crds/*.yaml: ClusterPolicy,
    NVIDIADriver, GPUCluster), by name."""
    folder = resources.files("ocp_gpu") / "crds"
    found = [yaml.safe_load(entry.read_text()) for entry in folder.iterdir() if entry.name.endswith(".yaml")]
    ours = [crd for crd in found if crd["spec"]["group"] == HOOK_GROUP]
    return sorted(ours, key=lambda crd: str(crd["metadata"]["name"]))


def is_established(crd: dict[str, Any] | None) -> bool:
    """The API server serves the CRD's current spec (condition Established=True)."""
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _get(api_client: clients.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = requesting.request(
            api_client, "GET", requesting.object_path(CRD_API_VERSION, CRD_KIND, name)
        )
    except requesting.ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def _wait(check: Any, deadline: float, what: str) -> None:
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


def apply_crds(api_client: clients.ApiClient, timeout: float) -> list[str]:
    """Apply every shipped CRD, then wait until each is Established; the names applied."""
    names = []
    for crd in shipped_crds():
        applying.apply(api_client, crd)
        names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + timeout
    for name in names:
        _wait(lambda name=name: is_established(_get(api_client, name)), deadline, f"{name} not Established")
    return names


def delete_crds(api_client: clients.ApiClient, timeout: float) -> list[str]:
    """Delete every shipped CRD that exists, then wait until each is gone; the names deleted."""
    names = [
        crd["metadata"]["name"]
        for crd in shipped_crds()
        if applying.delete(api_client, CRD_API_VERSION, CRD_KIND, crd["metadata"]["name"])
    ]
    deadline = time.monotonic() + timeout
    for name in names:
        # NB: the API server deletes every object of the CRD first (ClusterPolicies, NVIDIADrivers).
        _wait(lambda name=name: _get(api_client, name) is None, deadline, f"{name} still present")
    return names


def main(args: argparse.Namespace) -> int:
    try:
        api_client = clients.load_api_client(args.kubeconfig)
    except clients.ConfigError as error:
        print(f"ocp-gpu crds: {error}", file=sys.stderr)
        return EXIT_FAILED
    try:
        if args.action == "apply":
            done = apply_crds(api_client, args.timeout)
            print(f"applied and Established: {', '.join(done)}")
        else:
            done = delete_crds(api_client, args.timeout)
            print(f"deleted: {', '.join(done) or 'none (already gone)'}")
    except requesting.ApiException as error:
        print(
            f"ocp-gpu crds {args.action}: the API server refused: {requesting.describe_error(error)}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except TimeoutError as error:
        print(f"ocp-gpu crds {args.action}: timed out after {args.timeout:g}s: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_DONE
