"""We test these aspects: the state-driver manifests and the safety of rendering.

- golden files (tests/unit/golden/state-driver/*.yaml, compared as YAML, rewritten with
  `--update-golden`): DTK, DTK with a missing tag, vanilla with two OS versions,
  precompiled, precompiled with a DTK fallback, proxy + trusted CA, tolerations and the
  other spec.daemonsets / spec.driver options;
- DaemonSet contracts that runbooks rely on (labels, selectors, OnDelete, container names,
  the shared DTK volume, env) independently of the golden files;
- env merging: driver.manager.env overrides the seed's defaults, owned env cannot be overridden;
- DRIVER_CONFIG_DIGEST: stable, changes with the driver's inputs, not with tolerations;
- injection: every string field of the policy and the cluster inputs set to hostile text
  (newlines, `: `, `{{ x }}`, quotes, `#`, `- a`, YAML line separators…) renders the same
  structure with the text verbatim as a value; `yaml_value` round-trips any string (hypothesis).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ocp_gpu.model import images, labels
from ocp_gpu.model.driver_snapshot import DriverDaemonSet, DriverKey
from ocp_gpu.model.operand_types import DRIVER_CONTAINER
from ocp_gpu.model.policy import policy_checks, policy_parser
from ocp_gpu.model.proxy import ClusterProxy
from ocp_gpu.planning.drivers import driver_fallback
from ocp_gpu.planning.drivers.driver_plan import DesiredDriverDaemonSet
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands.driver_rendering import DriverRenderInputs, render_driver_state
from tests.unit._drivers import (
    DTK_416,
    DTK_417,
    KERNEL_416,
    V416,
    V417,
    plan,
    rhcos_node,
    stream_with,
    ubuntu_node,
)

MANAGER_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0"
OPENSHIFT = DriverRenderInputs(
    namespace=labels.OPENSHIFT_NAMESPACE,
    openshift=True,
    manager_image=MANAGER_IMAGE,
    openshift_version="4.16",
)
KUBERNETES = DriverRenderInputs(namespace=labels.HELM_NAMESPACE, openshift=False, manager_image=MANAGER_IMAGE)
PROXY = ClusterProxy(
    http_proxy="http://proxy.example.com:3128",
    https_proxy="http://proxy.example.com:3129",
    no_proxy=".cluster.local,.svc,10.0.0.0/16",
    trusted_ca=True,
)
FULL_SPEC: dict[str, Any] = {
    "daemonsets": {
        "labels": {"team": "ml-platform"},
        "annotations": {"example.com/owner": "gpu-team"},
        "priorityClassName": "gpu-critical",
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "dedicated",
                "operator": "Equal",
                "value": "gpu",
                "effect": "NoExecute",
                "tolerationSeconds": 30,
            },
        ],
    },
    "driver": {
        "imagePullPolicy": "Always",
        "imagePullSecrets": ["ngc-secret"],
        "env": [{"name": "NVIDIA_DRIVER_DEBUG", "value": "1"}],
        "args": ["--debug"],
        "resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "200m", "memory": "512Mi"}},
        "kernelModuleType": "open",
        "manager": {
            "env": [
                {"name": "ENABLE_AUTO_DRAIN", "value": "false"},
                {"name": "DRAIN_TIMEOUT_SECONDS", "value": "300s"},
            ]
        },
    },
}


# The driver fields of NVIDIA's schema that ocp-gpu honours beyond the basics.
NVIDIA_DRIVER_SPEC: dict[str, Any] = {
    "daemonsets": {"podSecurityContext": {"runAsUser": 0, "seLinuxOptions": {"type": "spc_t"}}},
    "hostPaths": {"rootFS": "/host-root"},
    "driver": {
        "imagePullSecrets": ["ngc-secret"],
        "manager": {"imagePullSecrets": ["manager-secret", "ngc-secret"]},
        "secretEnv": "driver-secrets",
        "startupProbe": {"initialDelaySeconds": 120, "failureThreshold": 60},
        "livenessProbe": {"periodSeconds": 60},
        "readinessProbe": {"timeoutSeconds": 5},
        "licensingConfig": {"secretName": "licensing", "configMapName": "old-licensing"},
        "repoConfig": {"configMapName": "repos"},
        "certConfig": {"name": "certs"},
        "kernelModuleConfig": {"name": "module-params"},
    },
}
MODULE_IMAGES = {
    "gds": "nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5",
    "gdrcopy": "nvcr.io/nvidia/cloud-native/gdrdrv:v2.4.1",
}
CONFIG_MAP_KEYS = {
    "repos": ("cuda.repo", "local.repo"),
    "certs": ("corp-ca.pem",),
    "module-params": ("nvidia-uvm.conf", "nvidia.conf"),
}


def render(
    desired: tuple[DesiredDriverDaemonSet, ...],
    spec: dict[str, Any] | None = None,
    inputs: DriverRenderInputs = OPENSHIFT,
) -> list[dict[str, Any]]:
    return render_driver_state(desired, policy_parser.parse_policy(spec or {}), inputs)


def daemonsets(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == "DaemonSet"]


def container(daemonset: dict[str, Any], name: str) -> dict[str, Any]:
    pod = daemonset["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] + pod["initContainers"] if c["name"] == name)


def env_of(item: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in item["env"]}


# --- golden files (named scenarios) ---------------------------------------------------

FALLBACK_KEY = DriverKey(f"{KERNEL_416}-rhcos4.16")


def _scenarios() -> dict[str, tuple[tuple[DesiredDriverDaemonSet, ...], dict[str, Any], DriverRenderInputs]]:
    two_versions = [rhcos_node("gpu-1", V416), rhcos_node("gpu-2", V417, openshift="4.17")]
    return {
        "dtk": (plan(two_versions).desired, {}, OPENSHIFT),
        "dtk-missing-tag": (plan(two_versions, stream=stream_with((V416, DTK_416))).desired, {}, OPENSHIFT),
        "vanilla-two-os": (
            plan([ubuntu_node("u-1", "22.04"), ubuntu_node("u-2", "24.04")], Strategy.VANILLA).desired,
            {},
            KUBERNETES,
        ),
        "precompiled": (
            plan(
                [ubuntu_node("u-1"), ubuntu_node("u-2", kernel="5.15.0-106-generic")], Strategy.PRECOMPILED
            ).desired,
            {"driver": {"usePrecompiled": True, "version": "570"}},
            KUBERNETES,
        ),
        "precompiled-dtk-fallback": (
            plan(
                [
                    rhcos_node("gpu-1", V416),
                    rhcos_node("gpu-2", V417, openshift="4.17", kernel="5.14.0-427.37.1.el9_4.x86_64"),
                ],
                Strategy.PRECOMPILED,
                dtk_fallback={FALLBACK_KEY: f"nvcr.io/nvidia/driver:570-{KERNEL_416}-rhcos4.16"},
                fallback_driver_image=images.ImageRef("nvcr.io/nvidia/driver:570.124.06"),
            ).desired,
            {"driver": {"usePrecompiled": True, "version": "570"}},
            OPENSHIFT,
        ),
        "proxy-trusted-ca": (plan(two_versions[:1]).desired, {}, dataclasses.replace(OPENSHIFT, proxy=PROXY)),
        "tolerations-and-options": (plan(two_versions[:1]).desired, FULL_SPEC, OPENSHIFT),
        "rdma-host-mofed": (
            plan([ubuntu_node("u-1")], Strategy.VANILLA).desired,
            {
                "driver": {
                    "rdma": {"enabled": True, "useHostMofed": True},
                    "kernelModuleConfig": {"name": "params"},
                }
            },
            dataclasses.replace(KUBERNETES, config_map_keys={"params": ("nvidia-peermem.conf",)}),
        ),
        "gds-gdrcopy-dtk": (
            plan(two_versions[:1]).desired,
            {
                "gds": {"enabled": True, "version": "2.20.5"},
                "gdrcopy": {"enabled": True, "imagePullSecrets": ["gdr"]},
            },
            dataclasses.replace(OPENSHIFT, module_images=MODULE_IMAGES),
        ),
        "honoured-nvidia-fields": (
            plan(two_versions[:1]).desired,
            NVIDIA_DRIVER_SPEC,
            dataclasses.replace(OPENSHIFT, config_map_keys=CONFIG_MAP_KEYS),
        ),
    }


SCENARIOS = _scenarios()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden(scenario: str, update_golden: bool, golden_dir: Path) -> None:
    desired, spec, inputs = SCENARIOS[scenario]
    rendered = render(desired, spec, inputs)
    path = golden_dir / "state-driver" / f"{scenario}.yaml"
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(rendered, sort_keys=False, width=120))
    assert path.exists(), f"{path} missing: run `pytest tests/unit --update-golden`"
    expected = list(yaml.safe_load_all(path.read_text()))
    assert rendered == expected, f"{scenario} differs from {path}; if intended, rerun with --update-golden"


def test_every_golden_file_has_a_scenario(golden_dir: Path) -> None:
    files = {path.stem for path in (golden_dir / "state-driver").glob("*.yaml")}
    assert files == set(SCENARIOS)


# --- contracts ------------------------------------------------------------------------


def test_objects_in_apply_order() -> None:
    kinds = [
        (m["kind"], m["metadata"]["name"])
        for m in render(SCENARIOS["proxy-trusted-ca"][0], {}, SCENARIOS["proxy-trusted-ca"][2])
    ]
    assert [kind for kind, _ in kinds] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "ConfigMap",
        "ConfigMap",
        "DaemonSet",
    ]
    # the trusted CA bundle, then the startup probe script the DaemonSet mounts
    assert [name for kind, name in kinds if kind == "ConfigMap"][1] == "nvidia-driver-startup-probe"


def test_openshift_only_objects() -> None:
    desired = plan([ubuntu_node("u")], Strategy.VANILLA).desired
    vanilla = render(desired, {}, dataclasses.replace(KUBERNETES, proxy=PROXY))
    assert {m["kind"] for m in vanilla} == {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
    }
    scc = next(
        m for m in render(desired, {}, OPENSHIFT) if m["metadata"]["name"] == "nvidia-driver-privileged-scc"
    )
    assert scc["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:openshift:scc:privileged",
    }
    assert scc["subjects"] == [
        {"kind": "ServiceAccount", "name": "nvidia-driver", "namespace": "nvidia-gpu-operator"}
    ]


def test_every_object_is_ours() -> None:
    for manifest in render(SCENARIOS["proxy-trusted-ca"][0], {}, SCENARIOS["proxy-trusted-ca"][2]):
        assert manifest["metadata"]["labels"][labels.MANAGED_BY] == labels.MANAGED_BY_VALUE


def test_trusted_ca_configmap_is_injected_never_written() -> None:
    desired, _, inputs = SCENARIOS["proxy-trusted-ca"]
    configmap = next(m for m in render(desired, {}, inputs) if m["kind"] == "ConfigMap")
    assert configmap["metadata"]["labels"][labels.INJECT_TRUSTED_CABUNDLE] == "true"
    assert "data" not in configmap


@pytest.mark.parametrize("scenario", ["dtk", "vanilla-two-os", "precompiled"])
def test_daemonset_contract(scenario: str) -> None:
    desired, spec, inputs = SCENARIOS[scenario]
    for entry, ds in zip(desired, daemonsets(render(desired, spec, inputs)), strict=True):
        meta, pod_meta = ds["metadata"], ds["spec"]["template"]["metadata"]
        assert meta["name"] == entry.name
        # every driver pod carries the component; vanilla and precompiled ones app=nvidia-driver-daemonset
        # (the seed's `-lapp=`), DTK ones app=<DaemonSet name> (NVIDIA's selector)
        assert pod_meta["labels"][labels.COMPONENT] == labels.DRIVER_COMPONENT
        assert pod_meta["labels"][labels.APP] == (entry.name if scenario == "dtk" else labels.DRIVER_APP)
        # the selector is the planner's, and the pods carry it
        assert ds["spec"]["selector"]["matchLabels"] == dict(entry.selector)
        assert dict(entry.selector).items() <= pod_meta["labels"].items()
        assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
        pod = ds["spec"]["template"]["spec"]
        assert pod["hostPID"] is True
        assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.driver": "true", **entry.node_selector}
        assert [c["name"] for c in pod["initContainers"]] == ["k8s-driver-manager"]
        names = [c["name"] for c in pod["containers"]]
        assert names == (
            ["nvidia-driver-ctr", "openshift-driver-toolkit-ctr"]
            if entry.strategy is Strategy.DTK
            else ["nvidia-driver-ctr"]
        )
        assert container(ds, "nvidia-driver-ctr")["image"] == entry.driver_image
        assert container(ds, "nvidia-driver-ctr")["securityContext"]["privileged"] is True


def test_dtk_pod() -> None:
    desired, spec, inputs = SCENARIOS["dtk-missing-tag"]
    present, missing = daemonsets(render(desired, spec, inputs))
    for ds, version, image, is_missing in ((present, V416, DTK_416, False), (missing, V417, None, True)):
        driver, sidecar = container(ds, "nvidia-driver-ctr"), container(ds, "openshift-driver-toolkit-ctr")
        assert driver["command"] == ["ocp_dtk_entrypoint"] and driver["args"] == ["nv-ctr-run-with-dtk"]
        assert sidecar["securityContext"]["privileged"] is True
        assert sidecar["image"] == (image or driver["image"])
        shared = {"name": "shared-nvidia-driver-toolkit", "mountPath": "/mnt/shared-nvidia-driver-toolkit"}
        assert shared in driver["volumeMounts"] and shared in sidecar["volumeMounts"]
        assert {"name": "shared-nvidia-driver-toolkit", "emptyDir": {}} in ds["spec"]["template"]["spec"][
            "volumes"
        ]
        for item in (driver, sidecar):
            env = env_of(item)
            assert env["RHCOS_VERSION"] == version
            assert env["RHCOS_IMAGE_MISSING"] == ("true" if is_missing else "false")
            assert env["OPENSHIFT_VERSION"] == ("4.16" if version == V416 else "4.17")
            assert env["DRIVER_CONFIG_DIGEST"]
        labels_ = ds["metadata"]["labels"]
        assert labels_[labels.DTK_DAEMONSET] == "true" and labels_[labels.DTK_RHCOS] == version
        assert (labels_.get(labels.DTK_IMAGE_MISSING) == "true") == is_missing


def test_no_dtk_env_without_dtk() -> None:
    desired, spec, inputs = SCENARIOS["vanilla-two-os"]
    for ds in daemonsets(render(desired, spec, inputs)):
        env = env_of(container(ds, "nvidia-driver-ctr"))
        assert not {"RHCOS_VERSION", "RHCOS_IMAGE_MISSING", "OPENSHIFT_VERSION"} & set(env)
        assert container(ds, "nvidia-driver-ctr")["command"] == ["nvidia-driver"]
        volumes = {v["name"] for v in ds["spec"]["template"]["spec"]["volumes"]}
        assert "shared-nvidia-driver-toolkit" not in volumes
        assert labels.DTK_DAEMONSET not in ds["metadata"]["labels"]


def test_cluster_version_stands_in_for_a_missing_openshift_label() -> None:
    node = dataclasses.replace(rhcos_node("n"), openshift_version=None)
    (ds,) = daemonsets(render(plan([node]).desired))
    assert env_of(container(ds, "nvidia-driver-ctr"))["OPENSHIFT_VERSION"] == "4.16"


def test_proxy_env_and_ca_on_the_driver_container() -> None:
    desired, spec, inputs = SCENARIOS["proxy-trusted-ca"]
    (ds,) = daemonsets(render(desired, spec, inputs))
    env = env_of(container(ds, "nvidia-driver-ctr"))
    for name, value in (
        ("HTTP_PROXY", PROXY.http_proxy),
        ("HTTPS_PROXY", PROXY.https_proxy),
        ("NO_PROXY", PROXY.no_proxy),
    ):
        assert env[name] == env[name.lower()] == value
    mount = {"name": "trusted-ca", "mountPath": "/etc/pki/ca-trust/extracted/pem", "readOnly": True}
    assert mount in container(ds, "nvidia-driver-ctr")["volumeMounts"]
    assert "HTTP_PROXY" not in env_of(container(ds, "openshift-driver-toolkit-ctr"))


def test_proxy_without_trusted_ca_mounts_nothing() -> None:
    inputs = dataclasses.replace(
        OPENSHIFT, proxy=dataclasses.replace(PROXY, trusted_ca=False, https_proxy="")
    )
    manifests = render(SCENARIOS["dtk"][0], {}, inputs)
    assert [m["metadata"]["name"] for m in manifests if m["kind"] == "ConfigMap"] == [
        "nvidia-driver-startup-probe"
    ]
    env = env_of(container(daemonsets(manifests)[0], "nvidia-driver-ctr"))
    assert "HTTPS_PROXY" not in env and env["HTTP_PROXY"] == PROXY.http_proxy


def test_driver_manager_env_defaults_are_the_seeds() -> None:
    (ds,) = daemonsets(render(SCENARIOS["proxy-trusted-ca"][0]))
    env = env_of(container(ds, "k8s-driver-manager"))
    assert {name: env[name] for name in list(env)[3:9]} == {
        "ENABLE_GPU_POD_EVICTION": "true",
        "ENABLE_AUTO_DRAIN": "true",
        "DRAIN_USE_FORCE": "false",
        "DRAIN_POD_SELECTOR_LABEL": "",
        "DRAIN_TIMEOUT_SECONDS": "0s",
        "DRAIN_DELETE_EMPTYDIR_DATA": "false",
    }


def test_driver_manager_env_overrides_in_place() -> None:
    (ds,) = daemonsets(render(SCENARIOS["dtk"][0][:1], FULL_SPEC))
    manager = container(ds, "k8s-driver-manager")
    names = [e["name"] for e in manager["env"]]
    assert len(names) == len(set(names))
    env = env_of(manager)
    assert env["ENABLE_AUTO_DRAIN"] == "false" and env["DRAIN_TIMEOUT_SECONDS"] == "300s"
    assert env["ENABLE_GPU_POD_EVICTION"] == "true"
    assert names.index("ENABLE_AUTO_DRAIN") < names.index("DRAIN_USE_FORCE")


def test_policy_env_cannot_override_owned_env() -> None:
    spec = {
        "driver": {
            "env": [
                {"name": "RHCOS_VERSION", "value": "999"},
                {"name": "DRIVER_CONFIG_DIGEST", "value": "x"},
                {"name": "NODE_NAME", "value": "elsewhere"},
                {"name": "KERNEL_MODULE_TYPE", "value": "proprietary"},
            ]
        }
    }
    (ds,) = daemonsets(render(SCENARIOS["dtk"][0][:1], spec))
    driver = container(ds, "nvidia-driver-ctr")
    env = env_of(driver)
    assert env["RHCOS_VERSION"] == V416
    assert env["DRIVER_CONFIG_DIGEST"] != "x"
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # not owned: the policy may set it
    assert env["KERNEL_MODULE_TYPE"] == "proprietary"
    names = [e["name"] for e in driver["env"]]
    assert len(names) == len(set(names))


def test_fallback_daemonset_is_annotated() -> None:
    desired, spec, inputs = SCENARIOS["precompiled-dtk-fallback"]
    fallback = next(
        ds
        for ds in daemonsets(render(desired, spec, inputs))
        if labels.DTK_DAEMONSET in ds["metadata"]["labels"]
    )
    found = driver_fallback.fallbacks_in_effect(
        [DriverDaemonSet(name=fallback["metadata"]["name"], annotations=fallback["metadata"]["annotations"])]
    )
    assert found == {FALLBACK_KEY: f"nvcr.io/nvidia/driver:570-{KERNEL_416}-rhcos4.16"}


def test_user_labels_never_replace_identity_labels() -> None:
    spec = {"daemonsets": {"labels": {labels.APP: "mine", labels.DRIVER_KEY: "other", "extra": "yes"}}}
    (ds,) = daemonsets(render(SCENARIOS["dtk"][0][:1], spec))
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[labels.APP] == ds["metadata"]["name"]
    assert pod_labels[labels.DRIVER_KEY] == V416
    assert pod_labels["extra"] == "yes"


# --- the config digest ----------------------------------------------------------------


def digest_of(manifests: list[dict[str, Any]]) -> str:
    return str(env_of(container(daemonsets(manifests)[0], "nvidia-driver-ctr"))["DRIVER_CONFIG_DIGEST"])


def test_digest_is_stable_and_shared_by_all_containers() -> None:
    desired = SCENARIOS["dtk"][0][:1]
    first, again = render(desired), render(desired)
    assert digest_of(first) == digest_of(again)
    (ds,) = daemonsets(first)
    values = {
        env_of(container(ds, name))["DRIVER_CONFIG_DIGEST"]
        for name in ("nvidia-driver-ctr", "openshift-driver-toolkit-ctr", "k8s-driver-manager")
    }
    assert len(values) == 1


@pytest.mark.parametrize(
    ("change", "changes_digest"),
    [
        ({"driver": {"env": [{"name": "X", "value": "1"}]}}, True),
        ({"driver": {"args": ["--x"]}}, True),
        ({"driver": {"kernelModuleType": "open"}}, True),
        ({"daemonsets": {"tolerations": [{"operator": "Exists"}]}}, False),
        ({"daemonsets": {"priorityClassName": "other"}}, False),
        ({"driver": {"resources": {"limits": {"cpu": "1"}}}}, False),
        ({"driver": {"manager": {"env": [{"name": "ENABLE_AUTO_DRAIN", "value": "false"}]}}}, False),
    ],
    ids=["driver-env", "driver-args", "module-type", "tolerations", "priority", "resources", "manager-env"],
)
def test_digest_follows_what_the_driver_runs(change: dict[str, Any], changes_digest: bool) -> None:
    desired = SCENARIOS["dtk"][0][:1]
    assert (digest_of(render(desired)) != digest_of(render(desired, change))) == changes_digest


def test_digest_changes_when_the_dtk_tag_appears() -> None:
    nodes = [rhcos_node("n", V417)]
    missing = render(plan(nodes, stream=stream_with()).desired)
    present = render(plan(nodes, stream=stream_with((V417, DTK_417))).desired)
    assert digest_of(missing) != digest_of(present)


# --- injection ------------------------------------------------------------------------

HOSTILE = (
    "x\ny: z\n- a\n# c\n'q' \"d\" {{ x }} {% if 1 %}k{% endif %} ---\n... &a *a !!str |\n>  \u2028\x85\t: "
)


def hostile(i: int) -> str:
    return f"{HOSTILE}{i}"


def token(i: int) -> str:
    return f"token-{i}"


def _spec(text: Any) -> dict[str, Any]:
    """A ClusterPolicy spec with `text(i)` in every string field rendering touches."""
    return {
        "daemonsets": {
            "labels": {text(1): text(2)},
            "annotations": {text(3): text(4)},
            "priorityClassName": text(5),
            "tolerations": [{"key": text(6), "operator": text(7), "value": text(8), "effect": text(9)}],
            "podSecurityContext": {
                "seLinuxOptions": {"type": text(37)},
                "sysctls": [{"name": text(39), "value": text(40)}],
            },
        },
        "hostPaths": {"rootFS": text(38)},
        "gds": {"enabled": True, "env": [{"name": text(47), "value": text(48)}]},
        "driver": {
            "secretEnv": text(35),
            "licensingConfig": {"secretName": text(36)},
            "repoConfig": {"configMapName": text(41)},
            "kernelModuleConfig": {"name": text(42)},
            "certConfig": {"name": text(45)},
            "imagePullSecrets": [text(10)],
            "env": [{"name": text(11), "value": text(12)}],
            "args": [text(13)],
            "resources": {"limits": {text(14): text(15)}, "requests": {"cpu": text(16)}},
            "manager": {
                "env": [
                    {"name": text(17), "value": text(18)},
                    {"name": "ENABLE_AUTO_DRAIN", "value": text(19)},
                ],
                "imagePullSecrets": [text(34)],
            },
        },
    }


def _inputs(text: Any) -> DriverRenderInputs:
    return DriverRenderInputs(
        namespace=text(20),
        openshift=True,
        manager_image=text(21),
        openshift_version=text(22),
        proxy=ClusterProxy(http_proxy=text(23), https_proxy=text(24), no_proxy=text(25), trusted_ca=True),
        service_account=text(26),
        cluster_role=text(27),
        trusted_ca_configmap=text(28),
        config_map_keys={text(41): (text(43),), text(42): (text(44),), text(45): (text(46),)},
        module_images={"gds": text(49)},
    )


def _desired(text: Any) -> tuple[DesiredDriverDaemonSet, ...]:
    nodes = [rhcos_node("n", V416)]
    fallback_key = DriverKey(f"{KERNEL_416}-rhcos4.16")
    (entry,) = plan(nodes, Strategy.PRECOMPILED, dtk_fallback={fallback_key: "img"}).desired
    # values that come from the cluster (ImageStream, node labels) rather than the policy
    return (
        dataclasses.replace(
            entry,
            driver_image=text(29),
            dtk_image=text(30),
            fallback_image=text(31),
            openshift_version=None,
            node_selector={text(32): text(33)},
        ),
    )


def _replace_strings(value: Any, mapping: dict[str, str], seen: set[str]) -> Any:
    if isinstance(value, str):
        if value in mapping:
            seen.add(value)
            return mapping[value]
        # a hostile string inside a value (a ConfigMap key in a mount path): verbatim too
        for hostile_text in sorted(mapping, key=len, reverse=True):
            if hostile_text in value:
                seen.add(hostile_text)
                value = value.replace(hostile_text, mapping[hostile_text])
        return value
    if isinstance(value, dict):
        return {
            _replace_strings(k, mapping, seen): _replace_strings(v, mapping, seen) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_replace_strings(item, mapping, seen) for item in value]
    return value


def _without_digests(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = yaml.safe_dump_all(manifests)
    loaded = list(yaml.safe_load_all(text))
    for ds in daemonsets(loaded):
        pod = ds["spec"]["template"]["spec"]
        for item in pod["containers"] + pod["initContainers"]:
            for env in item["env"]:
                if env["name"] == "DRIVER_CONFIG_DIGEST":
                    env["value"] = "<digest>"
    return loaded


def test_hostile_strings_render_verbatim_as_values() -> None:
    benign = render_driver_state(_desired(token), policy_parser.parse_policy(_spec(token)), _inputs(token))
    attacked = render_driver_state(
        _desired(hostile), policy_parser.parse_policy(_spec(hostile)), _inputs(hostile)
    )
    mapping = {hostile(i): token(i) for i in range(1, 50)}
    seen: set[str] = set()
    # the same structure, with each hostile string exactly where its token was
    assert _replace_strings(_without_digests(attacked), mapping, seen) == _without_digests(benign)
    # and every hostile string made it through, verbatim
    assert seen == set(mapping)


@pytest.mark.parametrize(
    "text", [HOSTILE, "", "null", "true", "0x1F", "1e5", "~", "- a", "{a: b}", "[1]", "\ufeffbom", "é😀"]
)
def test_yaml_value_edge_strings(text: str) -> None:
    assert yaml.safe_load(f"key: {templating.yaml_value(text)}\n") == {"key": text}


# NB: no deadline: one example took 261 ms on a loaded machine (the landing gate, load ~12), 0.5 ms alone.
@settings(deadline=None)
@given(st.text())
def test_yaml_value_round_trips_any_string(text: str) -> None:
    assert yaml.safe_load(f"key: {templating.yaml_value(text)}\n") == {"key": text}
    assert yaml.safe_load(f"- {templating.yaml_value(text)}\n") == [text]
    assert yaml.safe_load(f"{templating.yaml_value(text)}: 1\n") == {text: 1}


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@given(json_like)
def test_yaml_value_round_trips_structures(value: Any) -> None:
    assert yaml.safe_load(f"key: {templating.yaml_value(value)}\n") == {"key": value}


@pytest.mark.parametrize("value", [1.5, object(), {1: "a"}])
def test_yaml_value_refuses_what_it_cannot_keep_exact(value: Any) -> None:
    with pytest.raises(TypeError):
        templating.yaml_value(value)


def test_undefined_names_fail(tmp_path: Path) -> None:
    (tmp_path / "state-x").mkdir()
    (tmp_path / "state-x" / "0100_x.yaml.j2").write_text("a: {{ missing }}\n")
    with pytest.raises(Exception, match="missing"):
        templating.render_state("state-x", {}, directory=tmp_path)


def test_templates_render_objects_only(tmp_path: Path) -> None:
    (tmp_path / "state-x").mkdir()
    (tmp_path / "state-x" / "0100_x.yaml.j2").write_text("- {{ a }}\n")
    with pytest.raises(ValueError, match="not an object"):
        templating.render_state("state-x", {"a": "b"}, directory=tmp_path)


def test_unknown_component() -> None:
    with pytest.raises(FileNotFoundError):
        templating.render_state("state-nothing", {})


# --- NVIDIA's driver fields ocp-gpu honours ---------------------------------------------


def _driver_pod(spec: dict[str, Any]) -> dict[str, Any]:
    (ds,) = daemonsets(render(plan([rhcos_node("n", V416)]).desired, spec))
    pod: dict[str, Any] = ds["spec"]["template"]["spec"]
    return pod


def test_unset_driver_fields_add_nothing() -> None:
    pod = _driver_pod({})
    driver = container({"spec": {"template": {"spec": pod}}}, DRIVER_CONTAINER)
    assert "securityContext" not in pod
    assert "envFrom" not in driver
    assert "livenessProbe" not in driver and "readinessProbe" not in driver
    assert not [m for m in driver["volumeMounts"] if m["name"] == "licensing-config"]
    assert next(v for v in pod["volumes"] if v["name"] == "host-root")["hostPath"]["path"] == "/"
    assert "HOST_ROOT" not in env_of(driver)


def test_pull_secrets_of_driver_and_manager_are_merged_once() -> None:
    pod = _driver_pod(
        {"driver": {"imagePullSecrets": ["a", "b"], "manager": {"imagePullSecrets": ["b", "c"]}}}
    )
    assert pod["imagePullSecrets"] == [{"name": "a"}, {"name": "b"}, {"name": "c"}]


@pytest.mark.parametrize(
    ("licensing", "source", "files"),
    [
        ({"secretName": "lic"}, {"secret": "lic"}, ["gridd.conf", "client_configuration_token.tok"]),
        ({"secretName": "lic", "nlsEnabled": False}, {"secret": "lic"}, ["gridd.conf"]),
        ({"configMapName": "old", "nlsEnabled": False}, {"configMap": "old"}, ["gridd.conf"]),
        (
            {"configMapName": "old", "secretName": "lic"},
            {"secret": "lic"},
            ["gridd.conf", "client_configuration_token.tok"],
        ),
    ],
)
def test_licensing_mounts_what_nvidia_mounts(
    licensing: dict[str, Any], source: dict[str, str], files: list[str]
) -> None:
    pod = _driver_pod({"driver": {"licensingConfig": licensing}})
    (volume,) = [v for v in pod["volumes"] if v["name"] == "licensing-config"]
    ((kind, name),) = source.items()
    assert (volume[kind].get("secretName") or volume[kind].get("name")) == name
    assert [item["key"] for item in volume[kind]["items"]] == files
    driver = container({"spec": {"template": {"spec": pod}}}, DRIVER_CONTAINER)
    mounts = {m["subPath"]: m["mountPath"] for m in driver["volumeMounts"] if m["name"] == "licensing-config"}
    assert list(mounts) == files
    assert mounts["gridd.conf"] == "/drivers/gridd.conf"


def test_probe_timings_lay_over_ours() -> None:
    pod = _driver_pod(
        {"driver": {"startupProbe": {"failureThreshold": 10, "periodSeconds": 0}, "livenessProbe": {}}}
    )
    driver = container({"spec": {"template": {"spec": pod}}}, DRIVER_CONTAINER)
    assert driver["startupProbe"]["failureThreshold"] == 10
    assert driver["startupProbe"]["periodSeconds"] == 10  # 0 keeps ours, as NVIDIA does
    assert driver["livenessProbe"]["exec"]["command"] == ["nvidia-smi"]
    assert "readinessProbe" not in driver


def test_a_startup_success_threshold_kubernetes_refuses_is_an_error() -> None:
    problems = policy_checks.validate_policy(
        policy_parser.parse_policy({"driver": {"startupProbe": {"successThreshold": 2}}}), {}
    )
    # (the image problems of an empty operator environment aside)
    assert [p.field for p in problems if "successThreshold" in p.field] == [
        "spec.driver.startupProbe.successThreshold"
    ]
    assert "allows only 1" in str(problems)


def test_root_fs_moves_host_root_and_says_so() -> None:
    pod = _driver_pod(
        {"hostPaths": {"rootFS": "/sysroot"}, "driver": {"env": [{"name": "HOST_ROOT", "value": "/x"}]}}
    )
    assert next(v for v in pod["volumes"] if v["name"] == "host-root")["hostPath"]["path"] == "/sysroot"
    for item in pod["containers"] + pod["initContainers"]:
        if item["name"] != "openshift-driver-toolkit-ctr":
            assert env_of(item)["HOST_ROOT"] == "/sysroot", item["name"]


# --- ConfigMaps the driver section names (repoConfig, certConfig, kernelModuleConfig) ------


def _view(keys: dict[str, tuple[str, ...] | None] | None) -> Any:
    from ocp_gpu.desired import driver_manifests

    return driver_manifests.DriverView(namespace="gpu-operator", env={}, node_facts=(), config_map_keys=keys)


CONFIG_SPEC = {"driver": {"repoConfig": {"configMapName": "repos"}, "kernelModuleConfig": {"name": "params"}}}


@pytest.mark.parametrize(
    ("keys", "field", "words"),
    [
        (None, "spec.driver.repoConfig.configMapName", "cannot be read offline"),
        ({"params": ("nvidia.conf",)}, "spec.driver.repoConfig.configMapName", "'repos' does not exist"),
        ({"repos": ("a.repo",)}, "spec.driver.kernelModuleConfig.name", "'params' does not exist"),
    ],
)
def test_a_named_config_map_that_cannot_be_mounted_is_a_problem_naming_the_field(
    keys: dict[str, tuple[str, ...] | None] | None, field: str, words: str
) -> None:
    from ocp_gpu.desired import driver_manifests

    problem = driver_manifests.config_map_problem(
        policy_parser.parse_policy(CONFIG_SPEC),
        _view(keys),
        plan([ubuntu_node("u")], Strategy.VANILLA).desired,
    )
    assert problem is not None and problem.field == field and words in problem.message


def test_an_os_without_a_repository_directory_is_a_problem() -> None:
    from ocp_gpu.desired import driver_manifests

    (entry,) = plan([ubuntu_node("u")], Strategy.VANILLA).desired
    problem = driver_manifests.config_map_problem(
        policy_parser.parse_policy(CONFIG_SPEC),
        _view({"repos": ("a.repo",), "params": ("nvidia.conf",)}),
        [dataclasses.replace(entry, os_tag="plan9.4")],
    )
    assert problem is not None and "'plan'" in problem.message


def test_config_maps_mount_each_key_where_the_os_expects_it() -> None:
    desired = plan([ubuntu_node("u")], Strategy.VANILLA).desired
    inputs = dataclasses.replace(
        KUBERNETES, config_map_keys={"repos": ("a.list",), "params": ("nvidia.conf",)}
    )
    (ds,) = daemonsets(render(desired, CONFIG_SPEC, inputs))
    driver = container(ds, DRIVER_CONTAINER)
    mounts = {
        m["mountPath"]: (m["name"], m["subPath"])
        for m in driver["volumeMounts"]
        if "subPath" in m and m["name"] != "driver-startup-probe-script"
    }
    assert mounts == {
        "/etc/apt/sources.list.d/a.list": ("repo-config", "a.list"),
        "/drivers/nvidia.conf": ("kernel-module-config", "nvidia.conf"),
    }
    # and nothing at all while the keys are unknown or the fields unset
    (bare,) = daemonsets(render(desired, CONFIG_SPEC, KUBERNETES))
    assert not [m for m in container(bare, DRIVER_CONTAINER)["volumeMounts"] if m["name"].endswith("-config")]


# --- the finished driver DaemonSet -----------------------------------------------------------


def test_startup_probe_runs_the_script_from_the_configmap() -> None:
    manifests = render(SCENARIOS["dtk"][0])
    (script,) = [m for m in manifests if m["metadata"]["name"] == "nvidia-driver-startup-probe"]
    text = script["data"]["startup-probe.sh"]
    for check in (
        "/sys/module/nvidia/refcnt",
        ".driver-daemons-status",
        "nvidia-smi",
        'mkdir -p "$validations"',
    ):
        assert check in text
    ds = daemonsets(manifests)[0]
    driver = container(ds, DRIVER_CONTAINER)
    assert driver["startupProbe"]["exec"]["command"] == ["sh", "/usr/local/bin/startup-probe.sh"]
    (mount,) = [m for m in driver["volumeMounts"] if m["name"] == "driver-startup-probe-script"]
    assert mount == {
        "name": "driver-startup-probe-script",
        "mountPath": "/usr/local/bin/startup-probe.sh",
        "subPath": "startup-probe.sh",
    }
    volume = next(
        v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == "driver-startup-probe-script"
    )
    assert volume["configMap"] == {"name": "nvidia-driver-startup-probe", "defaultMode": 0o555}


def test_sys_devices_system_replaces_the_memory_online_file() -> None:
    ds = daemonsets(render(SCENARIOS["dtk"][0]))[0]
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert "sysfs-memory-online" not in volumes
    assert volumes["host-sys-devices-system"]["hostPath"] == {"path": "/sys/devices/system"}
    assert {"name": "host-sys-devices-system", "mountPath": "/sys/devices/system"} in container(
        ds, DRIVER_CONTAINER
    )["volumeMounts"]


def test_init_container_gets_the_driver_resources() -> None:
    ds = daemonsets(render(SCENARIOS["dtk"][0], {"driver": {"resources": {"limits": {"memory": "1Gi"}}}}))[0]
    assert container(ds, "k8s-driver-manager")["resources"] == {"limits": {"memory": "1Gi"}}


@pytest.mark.parametrize("host_mofed", [False, True])
def test_rdma_adds_peermem_mofed_mounts_and_env_and_leaves_with_the_flag(host_mofed: bool) -> None:
    desired = plan([ubuntu_node("u")], Strategy.VANILLA).desired
    (ds,) = daemonsets(
        render(desired, {"driver": {"rdma": {"enabled": True, "useHostMofed": host_mofed}}}, KUBERNETES)
    )
    pod = ds["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == [DRIVER_CONTAINER, "nvidia-peermem-ctr"]
    peermem = container(ds, "nvidia-peermem-ctr")
    assert peermem["image"] == container(ds, DRIVER_CONTAINER)["image"]
    assert peermem["args"] == ["reload_nvidia_peermem"]
    for name in (DRIVER_CONTAINER, "k8s-driver-manager"):
        env = env_of(container(ds, name))
        assert env["GPU_DIRECT_RDMA_ENABLED"] == "true"
        assert env.get("USE_HOST_MOFED") == ("true" if host_mofed else None)
    sources = next(v for v in pod["volumes"] if v["name"] == "mlnx-ofed-usr-src")["hostPath"]["path"]
    assert sources == ("/usr/src" if host_mofed else "/run/mellanox/drivers/usr/src")
    (plain,) = daemonsets(
        render(desired, {"driver": {"rdma": {"enabled": False, "useHostMofed": True}}}, KUBERNETES)
    )
    plain_pod = plain["spec"]["template"]["spec"]
    assert [c["name"] for c in plain_pod["containers"]] == [DRIVER_CONTAINER]
    assert not [v for v in plain_pod["volumes"] if "mellanox" in v["name"] or "ofed" in v["name"]]
    assert "GPU_DIRECT_RDMA_ENABLED" not in env_of(container(plain, DRIVER_CONTAINER))


@pytest.mark.parametrize("openshift", [True, False])
def test_gds_and_gdrcopy_containers_come_and_go_with_their_flags(openshift: bool) -> None:
    if openshift:
        desired, inputs = plan([rhcos_node("n", V416)]).desired, OPENSHIFT
    else:
        desired, inputs = plan([ubuntu_node("u")], Strategy.VANILLA).desired, KUBERNETES
    spec = {"gds": {"enabled": True}, "gdrcopy": {"enabled": True}}
    (ds,) = daemonsets(render(desired, spec, dataclasses.replace(inputs, module_images=MODULE_IMAGES)))
    names = [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]]
    assert names[:3] == [DRIVER_CONTAINER, "nvidia-fs-ctr", "nvidia-gdrcopy-ctr"]
    fs = container(ds, "nvidia-fs-ctr")
    suffix = desired[0].os_tag
    assert fs["image"] == f"nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5-{suffix}"
    for name in [DRIVER_CONTAINER] + (["openshift-driver-toolkit-ctr"] if openshift else []):
        env = env_of(container(ds, name))
        assert env["GDS_ENABLED"] == env["GDRCOPY_ENABLED"] == "true", name
    if openshift:
        assert fs["command"] == ["ocp_dtk_entrypoint"] and fs["args"] == ["nv-fs-ctr-run-with-dtk"]
        assert {
            "name": "shared-nvidia-driver-toolkit",
            "mountPath": "/mnt/shared-nvidia-driver-toolkit",
        } in fs["volumeMounts"]
    else:
        assert fs["args"][0].endswith("exec nvidia-gds-driver install")
    (plain,) = daemonsets(render(desired, {}, inputs))
    assert "nvidia-fs-ctr" not in [c["name"] for c in plain["spec"]["template"]["spec"]["containers"]]
    assert "GDS_ENABLED" not in env_of(container(plain, DRIVER_CONTAINER))


def test_gds_with_precompiled_drivers_is_an_error_naming_the_field() -> None:
    problems = policy_checks.validate_policy(
        policy_parser.parse_policy({"driver": {"usePrecompiled": True}, "gds": {"enabled": True}}), {}
    )
    assert "spec.gds.enabled" in [p.field for p in problems]
