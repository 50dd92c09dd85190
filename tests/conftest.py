"""Fixtures shared by every test layer: the local control plane and its clients.

- ``control_plane``: one `LocalControlPlane` per session (vanilla Kubernetes; the
  OpenShift APIs are not installed). Skipped only when ``OCP_GPU_SKIP_E2E=1``;
  missing binaries are built first (see `pytest_collection_finish`).
  ``OCP_GPU_KEEP_STATE=1`` keeps its state dir (logs, audit log, kubeconfigs).
- ``kube``: an admin `kubernetes.client.ApiClient`.
- ``api``: the admin through ocp-gpu's own client (`kube/sending.py`), what kube/ functions take.
- ``openshift``: the same client, with the OpenShift APIs installed for the test.
- ``namespace``: a fresh namespace for the test, deleted afterwards.
- ``helm_tools``: helm (built from Go modules on first use, hack/build-helm.sh) and the
  Node Feature Discovery chart the ocp-gpu chart depends on; skipped only when
  ``OCP_GPU_SKIP_E2E=1`` (a machine without Go).

Every Hypothesis test runs without a per-example deadline and without the "input generation is
slow" health check: both time the machine, not the code (tests/unit/test_imagestreams.py's
property test failed a landing at load 30 on that check alone, issue 30).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from kubernetes import client

from ocp_gpu.kube import clients
from ocp_gpu_harness import binaries, polling
from ocp_gpu_harness import monitoring as monitoring_emulation
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name

SKIP_E2E = os.environ.get("OCP_GPU_SKIP_E2E") == "1"

settings.register_profile("loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded-machine")


def _needs_control_plane(item: pytest.Item) -> bool:
    return item.get_closest_marker("e2e") is not None or "control_plane" in getattr(item, "fixturenames", ())


def _needs_helm(item: pytest.Item) -> bool:
    return "helm_tools" in getattr(item, "fixturenames", ())


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build missing control plane binaries before any test runs.

    NB: here, not in the fixture: a cold build takes 30-60 minutes, and inside a
    fixture pytest-timeout would kill it; output capture is suspended so the
    build's progress shows."""
    if SKIP_E2E:
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    if any(_needs_helm(item) for item in session.items) and binaries.find_helm() is None:
        with capture.global_and_fixture_disabled():
            binaries.ensure_helm(progress=lambda line: print(line, end="", file=sys.stderr, flush=True))
    if not any(_needs_control_plane(item) for item in session.items):
        return
    if not binaries.missing():
        return
    with capture.global_and_fixture_disabled():
        binaries.ensure_binaries(progress=lambda line: print(line, end="", file=sys.stderr, flush=True))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[LocalControlPlane]:
    if SKIP_E2E:
        pytest.skip("OCP_GPU_SKIP_E2E=1: end-to-end tests skipped")
    keep = os.environ.get("OCP_GPU_KEEP_STATE") == "1"
    plane = LocalControlPlane(binaries=binaries.ensure_binaries(), keep_state=keep)
    with plane:
        yield plane
        # A component that crashed mid-session explains odd failures: say so.
        plane.check_processes()
    if keep:
        print(f"\ncontrol plane state kept in {plane.state_dir}", file=sys.stderr)


@pytest.fixture(scope="session")
def helm_tools() -> binaries.HelmTools:
    if SKIP_E2E:
        pytest.skip("OCP_GPU_SKIP_E2E=1: helm (built with Go) not used")
    return binaries.ensure_helm()


@pytest.fixture
def kube(control_plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.api_client() as api:
        yield api


@pytest.fixture
def api(control_plane: LocalControlPlane) -> Iterator[clients.ApiClient]:
    own = clients.load_api_client(control_plane.kubeconfig)
    yield own
    own.close()


@pytest.fixture
def openshift(kube: client.ApiClient) -> Iterator[client.ApiClient]:
    """The cluster "is OpenShift" for this test (ClusterVersion 4.16.3, no proxy)."""
    openshift_emulation.install_openshift_apis(kube)
    yield kube
    openshift_emulation.uninstall_openshift_apis(kube)


@pytest.fixture
def namespace(kube: client.ApiClient) -> Iterator[str]:
    name = unique_name("test")
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": name}})
    # NB: until the serviceaccount controller has made "default", the ServiceAccount
    # admission plugin rejects every pod created in the namespace.
    # Budget 30 s: the controller makes it within a second of the namespace on a quiet machine.
    polling.wait_for(
        lambda: core.list_namespaced_service_account(name, field_selector="metadata.name=default").items,
        30,
        what=f"the default ServiceAccount in {name}",
        interval=0.05,
    )
    yield name
    # Not waited for: the namespace controller empties it in the background.
    core.delete_namespace(name)


@pytest.fixture
def monitoring_api(kube: client.ApiClient) -> Iterator[client.ApiClient]:
    """The cluster serves monitoring.coreos.com (ServiceMonitor, PrometheusRule) for the test."""
    monitoring_emulation.install_monitoring_apis(kube)
    yield kube
    monitoring_emulation.uninstall_monitoring_apis(kube)
