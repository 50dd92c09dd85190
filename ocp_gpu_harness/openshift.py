"""OpenShift emulation: the OpenShift APIs the operator reads, as CRDs.

With these installed the local control plane "is OpenShift" to the operator:
``config.openshift.io/v1`` ClusterVersion ``version`` and Proxy ``cluster`` (the real
CRD manifests from openshift/api) and ``image.openshift.io/v1`` ImageStream (on
OpenShift an aggregated API server; here a CRD generated from its real schema by
``hack/gen_imagestream_crd.py``). Without them the cluster is vanilla Kubernetes.

What is not emulated: the operators behind these APIs. Nothing imports images, the
Cluster Network Operator does not inject CA bundles into ConfigMaps labelled
``config.openshift.io/inject-trusted-cabundle``, and ClusterVersion only changes
when a test calls `set_cluster_version`. Statuses are written the way those
operators would have written them.
"""

from __future__ import annotations

import datetime
import hashlib
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Literal

import kubernetes.client
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu.model import apis
from ocp_gpu_harness import crds, polling

# The manifests, shipped as package data.
API_DIR: Final = Path(__file__).parent / "openshift_api"
CRD_FILES: Final = (
    "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    "0000_03_config-operator_01_proxies.crd.yaml",
    "image.openshift.io_imagestreams.crd.yaml",
)

# The OpenShift release the emulated cluster reports unless told otherwise.
DEFAULT_OPENSHIFT_VERSION: Final = "4.16.3"

# Where OpenShift publishes the Driver Toolkit image per RHCOS version.
DTK_NAMESPACE: Final = "openshift"
DTK_IMAGESTREAM: Final = "driver-toolkit"
# Tags every real DTK ImageStream carries besides the per-RHCOS ones (not versions!).
DTK_LATEST_TAG: Final = "latest"
DTK_LATEST_RHEL10_TAG: Final = "latest-rhel-10"
# The integrated registry's in-cluster name, as status.dockerImageRepository shows it.
_REGISTRY: Final = "image-registry.openshift-image-registry.svc:5000"
_RELEASE_REPO: Final = "quay.io/openshift-release-dev/ocp-release"

# Field manager for server-side apply; its owned fields are exactly what we last set.
FIELD_MANAGER: Final = "ocp-gpu-harness"
_APPLY: Final = "application/apply-patch+yaml"
# Marks namespaces the emulation created, so uninstalling removes only those.
CREATED_BY_LABEL: Final = "ocp-gpu.harness/created-by"
_CREATED_BY: Final = "openshift-emulation"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    polling.wait_for(check, timeout, what=what, interval=0.1)


def _fake_digest(seed: str) -> str:
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


def load_crds() -> list[dict[str, Any]]:
    """The three CRD manifests as dicts."""
    return [yaml.safe_load((API_DIR / name).read_text()) for name in CRD_FILES]


def _served_resources(api_client: ApiClient, group: str, version: str) -> set[str]:
    """Resources discovery lists for group/version (empty if the group is not served)."""
    try:
        found = kubernetes.client.CustomObjectsApi(api_client).get_api_resources(group, version)
    except ApiException as e:
        if e.status == 404:
            return set()
        raise
    return {r.name for r in (found.resources or [])}


def _expected_resources() -> dict[tuple[str, str], set[str]]:
    expected: dict[tuple[str, str], set[str]] = {}
    for crd in load_crds():
        for v in crd["spec"]["versions"]:
            if v.get("served", True):
                key = (crd["spec"]["group"], v["name"])
                expected.setdefault(key, set()).add(crd["spec"]["names"]["plural"])
    return expected


def _ensure_namespace(api_client: ApiClient, name: str, timeout: float = 60.0) -> None:
    """Create the namespace unless it exists; wait out a previous one's deletion."""
    core = kubernetes.client.CoreV1Api(api_client)
    deadline = time.monotonic() + timeout
    while True:
        try:
            core.create_namespace({"metadata": {"name": name, "labels": {CREATED_BY_LABEL: _CREATED_BY}}})
            return
        except ApiException as e:
            if e.status != 409:
                raise
        # It exists: fine (and not ours to delete later) unless it is still going away
        # after an uninstall, which does not wait for that (see below).
        try:
            if core.read_namespace(name).status.phase != "Terminating":
                return
        except ApiException as e:
            if e.status != 404:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {name} still Terminating after {timeout:.0f}s")
        time.sleep(0.1)


def install_openshift_apis(
    api_client: ApiClient, *, version: str = DEFAULT_OPENSHIFT_VERSION, timeout: float = 60.0
) -> None:
    """Apply the CRDs, wait until they are Established and discoverable, then create
    ClusterVersion ``version`` (reporting ``version``) and Proxy ``cluster`` (no proxy)."""
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    names = []
    for crd in load_crds():
        name = crd["metadata"]["name"]
        names.append(name)
        ext.patch_custom_resource_definition(
            name, crd, field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY
        )

    # Established, then discoverable: a client that discovers right away (kopf, kubectl)
    # would miss the resources in between.
    crds.wait_until_served(api_client, names, timeout)
    _apply_cluster_version(
        api_client, "spec", {"clusterID": str(uuid.uuid4()), "channel": f"stable-{_minor(version)}"}
    )
    set_cluster_version(api_client, version)
    set_cluster_proxy(api_client)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def set_cluster_version(api_client: ApiClient, version: str) -> None:
    """Report ``version`` as ClusterVersion's desired and completed release, as the
    Cluster Version Operator does once an update has finished."""
    image = f"{_RELEASE_REPO}@{_fake_digest('release-' + version)}"
    now = _now()
    status = {
        "desired": {"version": version, "image": image, "channels": [f"stable-{_minor(version)}"]},
        "history": [
            {
                "state": "Completed",
                "version": version,
                "image": image,
                "startedTime": now,
                "completionTime": now,
                "verified": False,
            }
        ],
        "observedGeneration": 1,
        "versionHash": _fake_digest(version)[7:23],
        "availableUpdates": None,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastTransitionTime": now,
                "message": f"Done applying {version}",
            },
            {"type": "Failing", "status": "False", "lastTransitionTime": now},
            {
                "type": "Progressing",
                "status": "False",
                "lastTransitionTime": now,
                "message": f"Cluster version is {version}",
            },
        ],
    }
    _apply_cluster_version(api_client, "status", status)


def start_cluster_update(api_client: ApiClient, current: str, target: str) -> None:
    """Report ClusterVersion applying ``target`` over ``current``, as the Cluster Version
    Operator does while an update runs: desired is the target, the newest history entry
    is ``Partial`` and Progressing is True (the MCO has not rolled the pools yet)."""
    now = _now()
    images = {v: f"{_RELEASE_REPO}@{_fake_digest('release-' + v)}" for v in (current, target)}
    status = {
        "desired": {"version": target, "image": images[target], "channels": [f"stable-{_minor(target)}"]},
        "history": [
            {
                "state": "Partial",
                "version": target,
                "image": images[target],
                "startedTime": now,
                "completionTime": None,  # required, and null until the update completes
                "verified": False,
            },
            {
                "state": "Completed",
                "version": current,
                "image": images[current],
                "startedTime": now,
                "completionTime": now,
                "verified": False,
            },
        ],
        "observedGeneration": 2,
        "versionHash": _fake_digest(target)[7:23],
        "availableUpdates": None,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastTransitionTime": now,
                "message": f"Done applying {current}",
            },
            {"type": "Failing", "status": "False", "lastTransitionTime": now},
            {
                "type": "Progressing",
                "status": "True",
                "lastTransitionTime": now,
                "message": f"Working towards {target}",
            },
        ],
    }
    _apply_cluster_version(api_client, "status", status)


def _apply_cluster_version(api_client: ApiClient, part: Literal["spec", "status"], value: Any) -> None:
    """Server-side apply of ClusterVersion `version`'s spec or (through its subresource) status."""
    custom = kubernetes.client.CustomObjectsApi(api_client)
    patch = (
        custom.patch_cluster_custom_object if part == "spec" else custom.patch_cluster_custom_object_status
    )
    patch(
        apis.CONFIG_GROUP,
        "v1",
        "clusterversions",
        "version",
        {
            "apiVersion": f"{apis.CONFIG_GROUP}/v1",
            "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            part: value,
        },
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type=_APPLY,
    )


def set_cluster_proxy(
    api_client: ApiClient,
    http: str | None = None,
    https: str | None = None,
    no_proxy: str | None = None,
    trusted_ca_configmap: str | None = None,
) -> None:
    """Configure Proxy ``cluster`` (all None: no proxy), spec and status.

    ``trusted_ca_configmap`` names a ConfigMap in ``openshift-config`` (not created
    here). status.noProxy gets the cluster-internal destinations appended as the
    Cluster Network Operator does when any proxy is set."""
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}
    if http:
        spec["httpProxy"] = status["httpProxy"] = http
    if https:
        spec["httpsProxy"] = status["httpsProxy"] = https
    if no_proxy:
        spec["noProxy"] = no_proxy
    if http or https:
        internal = [".cluster.local", ".svc", "10.0.0.0/24", "10.244.0.0/16", "127.0.0.1", "localhost"]
        status["noProxy"] = ",".join([*(no_proxy.split(",") if no_proxy else []), *internal])
    if trusted_ca_configmap:
        spec["trustedCA"] = {"name": trusted_ca_configmap}
    custom = kubernetes.client.CustomObjectsApi(api_client)
    head = {"apiVersion": f"{apis.CONFIG_GROUP}/v1", "kind": "Proxy", "metadata": {"name": "cluster"}}
    # Apply: fields we set before and omit now are removed (unset proxy = no field).
    custom.patch_cluster_custom_object(
        apis.CONFIG_GROUP,
        "v1",
        "proxies",
        "cluster",
        {**head, "spec": spec},
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type=_APPLY,
    )
    custom.patch_cluster_custom_object_status(
        apis.CONFIG_GROUP,
        "v1",
        "proxies",
        "cluster",
        {**head, "status": status},
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type=_APPLY,
    )


def set_driver_toolkit_tags(
    api_client: ApiClient,
    tags: Mapping[str, str],
    *,
    latest_rhel_10: str | None = None,
    latest: str | None = None,
) -> None:
    """Make ImageStream openshift/driver-toolkit carry exactly ``tags``
    (RHCOS version -> image pull spec) plus ``latest`` and ``latest-rhel-10``.

    ``latest`` points at ``latest`` or the last image of ``tags`` (the newest, by the caller's
    order; an image of no tag is a payload whose build tag is missing); ``latest-rhel-10`` at
    ``latest_rhel_10`` or a distinct fake image in the same repository. Tags not given any
    more are removed, spec and status, as when OpenShift drops an old RHCOS from the stream.
    """
    all_tags = dict(tags)
    if all_tags:
        all_tags[DTK_LATEST_TAG] = latest or list(tags.values())[-1]
        repo = list(tags.values())[-1].split("@")[0].rsplit(":", 1)[0]
        all_tags[DTK_LATEST_RHEL10_TAG] = latest_rhel_10 or f"{repo}@{_fake_digest('rhel-10')}"
    head = {
        "apiVersion": f"{apis.IMAGE_GROUP}/v1",
        "kind": "ImageStream",
        "metadata": {"name": DTK_IMAGESTREAM, "namespace": DTK_NAMESPACE},
    }
    spec = {
        "tags": [
            {
                "name": tag,
                "from": {"kind": "DockerImage", "name": image},
                "importPolicy": {"scheduled": True, "importMode": "Legacy"},
                "referencePolicy": {"type": "Source"},
            }
            for tag, image in all_tags.items()
        ]
    }
    now = _now()
    status = {
        "dockerImageRepository": f"{_REGISTRY}/{DTK_NAMESPACE}/{DTK_IMAGESTREAM}",
        "tags": [
            {
                "tag": tag,
                "items": [
                    {
                        "created": now,
                        "dockerImageReference": image,
                        # The image's digest, as the importer records it.
                        "image": image.split("@", 1)[1] if "@" in image else _fake_digest(image),
                        "generation": 1,
                    }
                ],
            }
            for tag, image in all_tags.items()
        ],
    }
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for attempt in range(3):
        _ensure_namespace(api_client, DTK_NAMESPACE)
        try:
            custom.patch_namespaced_custom_object(
                apis.IMAGE_GROUP,
                "v1",
                DTK_NAMESPACE,
                "imagestreams",
                DTK_IMAGESTREAM,
                {**head, "spec": spec},
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=_APPLY,
            )
            break
        except ApiException as e:
            # NB: seen once in a full suite: the namespace read as Active, then refused the
            # ImageStream as "being terminated" (the previous test's uninstall): wait it out.
            if e.status != 403 or "NamespaceTerminating" not in str(e.body) or attempt == 2:
                raise
    custom.patch_namespaced_custom_object_status(
        apis.IMAGE_GROUP,
        "v1",
        DTK_NAMESPACE,
        "imagestreams",
        DTK_IMAGESTREAM,
        {**head, "status": status},
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type=_APPLY,
    )


# How long the emulation's CRDs may take to go.  NB: the API server's CRD cleanup deletes their
# objects and then polls every 5 s for up to a minute, retrying with backoff: 60 s timed out once
# in a stress run beside a CPU hog (the apiserver answering in 0.1 s; what was left not recorded,
# which `_left_behind` now says).
UNINSTALL_S: Final = 180.0


def uninstall_openshift_apis(api_client: ApiClient, *, timeout: float = UNINSTALL_S) -> None:
    """Delete the CRDs (and so every object of theirs) and the namespaces the
    emulation created; wait until discovery no longer lists the groups (but not
    until the namespaces are gone).  On a timeout, the error says what is left."""
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    core = kubernetes.client.CoreV1Api(api_client)
    selector = f"{CREATED_BY_LABEL}={_CREATED_BY}"
    # NB: not waited for: the namespace controller takes ~5 s to finish deleting even
    # an empty namespace (measured here, every time). Their objects go with the CRDs
    # anyway, and `_ensure_namespace` waits out a Terminating namespace if the next
    # install needs it again.
    for ns in core.list_namespace(label_selector=selector).items:
        _ignore_404(core.delete_namespace, ns.metadata.name)
    names = [crd["metadata"]["name"] for crd in load_crds()]
    for name in names:
        _ignore_404(ext.delete_custom_resource_definition, name)

    nudged_at = [time.monotonic()]

    def gone() -> bool:
        for name in names:
            try:
                crd = ext.read_custom_resource_definition(name)
            except ApiException as e:
                if e.status != 404:
                    raise
                continue
            if time.monotonic() - nudged_at[0] >= NUDGE_EVERY_S:
                nudged_at[0] = time.monotonic()
                _nudge_failed_cleanup(ext, crd)
            return False
        return not any(
            _served_resources(api_client, g, v) & plurals for (g, v), plurals in _expected_resources().items()
        )

    try:
        _wait("the OpenShift APIs to be removed", gone, timeout)
    except polling.WaitTimeout as error:
        raise polling.WaitTimeout(f"{error}; left: {_left_behind(api_client, names)}") from error


# The annotation that wakes the API server's CRD cleanup (any update of a deleted CRD does), at
# most this often: a cleanup that works takes ~5 s.
CLEANUP_NUDGE: Final = "ocp-gpu.io/cleanup-retry"
NUDGE_EVERY_S: Final = 10.0


def _nudge_failed_cleanup(ext: kubernetes.client.ApiextensionsV1Api, crd: Any) -> None:
    """Wake the API server's cleanup of a deleted CRD whose last attempt failed.

    NB: its finalizer controller retries a failure with an exponential backoff; a CRD deleted
    while its storage was still (re)initializing (a fresh install's CRDs, at once) failed over
    and over and then waited past the 180 s budget (`InstanceDeletionFailed: could not list
    instances: storage is (re)initializing`, seen once in a full test run).  An update of the
    CRD queues it again at once.
    """
    conditions = crd.status.conditions or []
    failed = any(c.type == "Terminating" and c.reason == "InstanceDeletionFailed" for c in conditions)
    if crd.metadata.deletion_timestamp is None or not failed:
        return
    tries = int((crd.metadata.annotations or {}).get(CLEANUP_NUDGE, "0")) + 1
    try:
        ext.patch_custom_resource_definition(
            crd.metadata.name, {"metadata": {"annotations": {CLEANUP_NUDGE: str(tries)}}}
        )
    except ApiException as e:
        if e.status != 404:
            raise


def _left_behind(api_client: ApiClient, names: list[str]) -> str:
    """What of the emulation's CRDs is still there: each one's deletion state and Terminating
    condition, and the discovery entries still served."""
    ext = kubernetes.client.ApiextensionsV1Api(api_client)
    left = []
    for name in names:
        try:
            crd = ext.read_custom_resource_definition(name)
        except ApiException as e:
            if e.status != 404:
                left.append(f"{name}: {e.status}")
            continue
        terminating = [
            f"{c.reason}: {c.message}" for c in (crd.status.conditions or []) if c.type == "Terminating"
        ]
        left.append(
            f"{name} (deleted at {crd.metadata.deletion_timestamp}, finalizers {crd.metadata.finalizers},"
            f" Terminating {terminating})"
        )
    for (group, version), plurals in _expected_resources().items():
        if served := _served_resources(api_client, group, version) & plurals:
            left.append(f"{group}/{version} still serves {sorted(served)}")
    return "; ".join(left) or "nothing (gone just now)"


def _ignore_404(call: Callable[[str], object], name: str) -> None:
    try:
        call(name)
    except ApiException as e:
        if e.status != 404:
            raise
