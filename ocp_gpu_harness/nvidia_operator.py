"""NVIDIA's real GPU Operator on the local control plane, for the tools that run it beside ocp-gpu
(hack/capture_nvidia_fixtures.py, bench/migrate_from_nvidia.py); never used in CI.

NVIDIA's source and its built manager stay outside this repository (bench/README.md says how to
build them): `<src>/bin/gpu-operator` and `<src>/optroot`, a copy of the image's /opt (its
docker/Dockerfile: assets -> gpu-operator/, manifests -> gpu-operator/manifests,
validator/manifests -> validator/manifests).  What is read of NVIDIA's source, at the version
checked out there: the bundle's CSV (its env, the OperatorHub example ClusterPolicy in
`alm-examples`) and its CRDs (config/crd/bases).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from ocp_gpu_harness import cluster

CSV = "bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml"


def csv(src: Path) -> dict[str, Any]:
    """The ClusterServiceVersion NVIDIA's bundle ships (how OLM installs the operator)."""
    found: dict[str, Any] = yaml.safe_load((src / CSV).read_text())
    return found


def example_policy(src: Path) -> dict[str, Any]:
    """NVIDIA's OperatorHub example ClusterPolicy (the CSV's `alm-examples`)."""
    examples = json.loads(csv(src)["metadata"]["annotations"]["alm-examples"])
    policy: dict[str, Any] = next(e for e in examples if e["kind"] == "ClusterPolicy")
    return policy


def csv_env(src: Path) -> dict[str, str]:
    """The manager container's env in the CSV (the operand images, ...), values only."""
    container = csv(src)["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"][
        "containers"
    ][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def crds(src: Path) -> list[dict[str, Any]]:
    """NVIDIA's CRDs (ClusterPolicy, NVIDIADriver, ...) as its source has them."""
    return [yaml.safe_load(path.read_text()) for path in crd_paths(src)]


def crd_paths(src: Path) -> list[Path]:
    return sorted((src / "config/crd/bases").glob("*.yaml"))


def minimal_crd(group: str, kind: str, plural: str, scope: str) -> dict[str, Any]:
    """A schemaless CRD for an API an OpenShift cluster serves and the harness does not (NVIDIA's
    operator reads SecurityContextConstraints, ServiceMonitors, PrometheusRules)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def openshift_crds() -> list[dict[str, Any]]:
    """The APIs of an OpenShift cluster (and its monitoring) NVIDIA's operator needs beyond the
    harness's emulation."""
    return [
        minimal_crd(
            "security.openshift.io", "SecurityContextConstraints", "securitycontextconstraints", "Cluster"
        ),
        minimal_crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", "Namespaced"),
        minimal_crd("monitoring.coreos.com", "PrometheusRule", "prometheusrules", "Namespaced"),
    ]


class NvidiaOperator:
    """NVIDIA's manager as a process: started (with leader election, as its CSV runs it) and stopped
    (SIGTERM, as a pod's deletion stops it) as often as asked; its output appended to `log_path`."""

    def __init__(
        self,
        src: Path,
        kubeconfig: Path,
        namespace: str,
        log_path: Path,
        *,
        binary: Path | None = None,
        optroot: Path | None = None,
    ) -> None:
        self.src, self.kubeconfig, self.namespace, self.log_path = src, kubeconfig, namespace, log_path
        self.binary = binary or src / "bin" / "gpu-operator"
        self.optroot = optroot or src / "optroot"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> NvidiaOperator:
        env = {
            **os.environ,
            **csv_env(self.src),
            "OPERATOR_NAMESPACE": self.namespace,
            "KUBECONFIG": str(self.kubeconfig),
        }
        # NB: NVIDIA's manager reads its manifests from /opt (hard-coded): a private mount namespace
        # (unshare -m, so this runs as root) shows the optroot there, the host's /opt untouched.
        script = f'mount --bind {self.optroot} /opt && exec {self.binary} "$@"'
        # NB: its defaults (:8080 metrics, :8081 probes) are taken on a shared machine (seen: OLM's
        # catalog operator of another test on 8080, and the manager exits at once): free ports
        metrics, probes = cluster.free_ports(2)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    "unshare",
                    "-m",
                    "sh",
                    "-c",
                    script,
                    "gpu-operator",
                    "--leader-elect",
                    f"--leader-elect-namespace={self.namespace}",
                    f"--metrics-bind-address=127.0.0.1:{metrics}",
                    f"--health-probe-bind-address=127.0.0.1:{probes}",
                    # NB: controller-runtime's default renew deadline (10 s) is lost at load 35 on 2
                    # shared cores (seen: "leader election lost", the manager exits mid-install);
                    # its main.go (v26.7.0) takes this flag and sets the lease 5 s longer
                    "--leader-lease-renew-deadline=60s",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)

    def __enter__(self) -> NvidiaOperator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
