"""We test these aspects of `ocp-gpu render` in file mode (live mode: tests/e2e/test_render_live.py):

- files in, YAML out, parsed back: one DaemonSet per RHCOS version with its DTK image;
  vanilla Ubuntu nodes -> one DaemonSet per OS with `<version>-<os>` images; a missing
  driver-toolkit tag shows in the summary (and on the DaemonSet's labels and env);
- the policy's forms: a whole ClusterPolicy, a bare spec, `oc get clusterpolicy -o yaml`
  (a List; the operator's choice among several), JSON, and stdin all render the same;
  the ownerReference appears only when the file carries the policy's uid;
- the output is what the driver reconciler applies: the same function, the same
  ownership metadata, byte for byte after a YAML round trip;
- the stream: apply order, `---` documents, sorted keys, stable across runs, hostile
  strings round-trip, long strings are not folded;
- exit status: 2 with the field named and nothing on stdout for an invalid policy (a
  validate_policy error, a CRD-shape error, an unresolvable image); 1 naming the file
  for a missing, unparsable or wrong-kind input; 2 for a contradictory command line;
- options: platform and namespace defaults, --platform, --env, --openshift-version,
  --policy-name, and driver.enabled: false (nothing rendered, exit 0).
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu import cli
from ocp_gpu.commands import render
from ocp_gpu.desired import driver_manifests
from ocp_gpu.kube import adopting, applying, labelling, reading, reporting
from ocp_gpu.model import apis, labels, releases
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.planning import platforms
from ocp_gpu.reconcilers import driver_reconciler, nvidia_drivers, runtime
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import nodes as fake_nodes
from tests.unit._drivers import DTK_416, DTK_417, V416, V417

V418 = "418.94.202501150000-0"
UID = "6f1c1a52-3b7e-4c1e-9d0a-5a7e0c2b9f11"
POLICY_OBJECT: dict[str, Any] = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy"},
    "spec": {"driver": {"version": "550.90.07"}},
}
DRIVER = "nvcr.io/nvidia/driver:550.90.07"

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


# --- builders -----------------------------------------------------------------------------


def node_list(*nodes: dict[str, Any]) -> dict[str, Any]:
    """What `oc get nodes -o yaml` prints."""
    return {"apiVersion": "v1", "kind": "List", "items": list(nodes), "metadata": {"resourceVersion": ""}}


def imagestream(tags: dict[str, str]) -> dict[str, Any]:
    """`oc get is driver-toolkit -n openshift -o yaml`, with `latest` as OpenShift ships it."""
    every = {**tags, "latest": list(tags.values())[-1]} if tags else {}
    return {
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
        "spec": {"tags": [{"name": n, "from": {"kind": "DockerImage", "name": i}} for n, i in every.items()]},
    }


RHCOS_NODES = node_list(
    fake_nodes.gpu_node("gpu-a", rhcos=V416),
    fake_nodes.gpu_node("gpu-b", rhcos=V416),
    fake_nodes.gpu_node("gpu-c", rhcos=V417, os_version="4.17"),
    fake_nodes.cpu_node("cpu-a", rhcos=V416),
)
UBUNTU_NODES = [
    fake_nodes.vanilla_gpu_node("ubuntu-a", os_version="20.04"),
    fake_nodes.vanilla_gpu_node("ubuntu-b", os_version="22.04"),
    fake_nodes.vanilla_gpu_node("ubuntu-c", os_version="22.04"),
]


class Run:
    """One `ocp-gpu render` invocation: exit status, stdout, stderr and the parsed stream."""

    def __init__(self, status: int, out: str, err: str) -> None:
        self.status, self.out, self.err = status, out, err
        # Everything rendered; `manifests` holds the driver's (the operand stack's are
        # tested in test_operand_rendering.py and below, test_every_operand_is_rendered).
        self.all_manifests: list[dict[str, Any]] = [m for m in yaml.safe_load_all(out) if m is not None]
        self.manifests = [
            m
            for m in self.all_manifests
            if m["metadata"].get("labels", {}).get(labels.COMPONENT) == labels.DRIVER_COMPONENT
        ]

    def daemonsets(self) -> dict[str, dict[str, Any]]:
        return {m["metadata"]["name"]: m for m in self.manifests if m["kind"] == "DaemonSet"}


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., str]:
    """Write a file (YAML, or a stream of documents, or text as is) and return its path."""

    def write_file(name: str, content: Any, *, stream: bool = False) -> str:
        path = tmp_path / name
        if isinstance(content, str):
            path.write_text(content)
        elif stream:
            path.write_text(yaml.safe_dump_all(content))
        else:
            path.write_text(yaml.safe_dump(content))
        return str(path)

    return write_file


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run_render(*argv: str) -> Run:
        status = cli.main(["render", *argv])
        captured = capsys.readouterr()
        return Run(status, captured.out, captured.err)

    return run_render


@pytest.fixture
def dtk_files(write: Callable[..., str]) -> list[str]:
    """A policy, two RHCOS versions (plus a CPU node) and a stream with both tags."""
    return [
        "--policy",
        write("policy.yaml", POLICY_OBJECT),
        "--nodes",
        write("nodes.yaml", RHCOS_NODES),
        "--imagestream",
        write("dtk.yaml", imagestream({V416: DTK_416, V417: DTK_417})),
    ]


def containers(daemonset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in daemonset["spec"]["template"]["spec"]["containers"]}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


# --- files in, YAML out -----------------------------------------------------------------------


def test_rhcos_nodes_get_one_daemonset_per_version_with_its_dtk_image(
    run: Callable[..., Run], dtk_files: list[str]
) -> None:
    result = run(*dtk_files)
    assert result.status == 0, result.err
    daemonsets = result.daemonsets()
    assert set(daemonsets) == {f"nvidia-driver-daemonset-{V416}", f"nvidia-driver-daemonset-{V417}"}
    for version, dtk in ((V416, DTK_416), (V417, DTK_417)):
        daemonset = daemonsets[f"nvidia-driver-daemonset-{version}"]
        assert daemonset["metadata"]["namespace"] == labels.OPENSHIFT_NAMESPACE
        assert daemonset["metadata"]["labels"][labels.DTK_RHCOS] == version
        assert daemonset["spec"]["template"]["spec"]["nodeSelector"][labels.OSTREE_VERSION] == version
        assert daemonset["spec"]["updateStrategy"]["type"] == "OnDelete"
        sidecar = containers(daemonset)["openshift-driver-toolkit-ctr"]
        assert sidecar["image"] == dtk
        assert env_of(sidecar)["RHCOS_VERSION"] == version
        os_tag = "rhcos4.16" if version == V416 else "rhcos4.17"  # NFD's ID and VERSION_ID, as NVIDIA tags
        assert containers(daemonset)["nvidia-driver-ctr"]["image"] == f"{DRIVER}-{os_tag}"
    # the summary: platform, strategy, one line per DaemonSet with its nodes and images
    assert "platform: openshift (an ImageStream file was given)" in result.err
    assert "strategy: dtk" in result.err
    assert (
        f"nvidia-driver-daemonset-{V416}: key {V416}, 2 nodes (gpu-a, gpu-b), "
        f"driver {DRIVER}-rhcos4.16, DTK {DTK_416}"
    ) in result.err
    assert f"1 node (gpu-c), driver {DRIVER}-rhcos4.17, DTK {DTK_417}" in result.err
    # no live cluster, nothing to delete or compare with
    assert "would delete" not in result.err and "[new]" not in result.err


def test_vanilla_ubuntu_nodes_get_one_daemonset_per_os(
    run: Callable[..., Run], write: Callable[..., str]
) -> None:
    result = run(
        "--policy", write("policy.yaml", POLICY_OBJECT), "--nodes", write("n.yaml", UBUNTU_NODES, stream=True)
    )
    assert result.status == 0, result.err
    daemonsets = result.daemonsets()
    assert set(daemonsets) == {"nvidia-driver-daemonset-ubuntu20.04", "nvidia-driver-daemonset-ubuntu22.04"}
    for os_tag in ("ubuntu20.04", "ubuntu22.04"):
        daemonset = daemonsets[f"nvidia-driver-daemonset-{os_tag}"]
        assert containers(daemonset)["nvidia-driver-ctr"]["image"] == f"{DRIVER}-{os_tag}"
        assert daemonset["spec"]["template"]["spec"]["nodeSelector"][labels.OS_VERSION_ID] == os_tag[6:]
    # no Driver Toolkit outside OpenShift, and the Helm chart's namespace
    assert all("openshift-driver-toolkit-ctr" not in containers(d) for d in daemonsets.values())
    assert {d["metadata"]["namespace"] for d in daemonsets.values()} == {labels.HELM_NAMESPACE}
    assert "platform: kubernetes" in result.err and "strategy: vanilla" in result.err
    assert "2 nodes (ubuntu-b, ubuntu-c)" in result.err
    assert ", DTK" not in result.err


def test_a_missing_tag_shows_in_the_summary_and_on_the_daemonset(
    run: Callable[..., Run], write: Callable[..., str]
) -> None:
    nodes = node_list(fake_nodes.gpu_node("gpu-a", rhcos=V416), fake_nodes.gpu_node("gpu-new", rhcos=V418))
    result = run(
        "--policy",
        write("policy.yaml", POLICY_OBJECT),
        "--nodes",
        write("nodes.yaml", nodes),
        "--imagestream",
        write("dtk.yaml", imagestream({V416: DTK_416})),
    )
    assert result.status == 0, result.err
    missing = result.daemonsets()[f"nvidia-driver-daemonset-{V418}"]
    assert missing["metadata"]["labels"][labels.DTK_IMAGE_MISSING] == "true"
    assert env_of(containers(missing)["nvidia-driver-ctr"])["RHCOS_IMAGE_MISSING"] == "true"
    assert f"nvidia-driver-daemonset-{V418}: key {V418}, 1 node (gpu-new)" in result.err
    assert "DTK missing" in result.err
    assert (
        f"DriverToolkitImageMissing: no driver-toolkit ImageStream tag for RHCOS {V418} (nodes: gpu-new)"
        in (result.err)
    )
    assert f"DTK {DTK_416}" in result.err


def test_openshift_without_an_imagestream_file_has_every_tag_missing(
    run: Callable[..., Run], write: Callable[..., str]
) -> None:
    result = run(
        "--policy",
        write("p.yaml", POLICY_OBJECT),
        "--nodes",
        write("n.yaml", RHCOS_NODES),
        "--platform",
        "openshift",
    )
    assert result.status == 0, result.err
    assert "platform: openshift (--platform openshift)" in result.err
    assert result.err.count("DTK missing") == 2
    assert "DriverToolkitImageStreamProblem" in result.err


# --- the policy's forms -------------------------------------------------------------------------

SPEC = POLICY_OBJECT["spec"]
POLICY_FORMS: dict[str, Callable[[], str]] = {
    "whole object": lambda: yaml.safe_dump(POLICY_OBJECT),
    "bare spec": lambda: yaml.safe_dump(SPEC),
    "oc get -o yaml (List)": lambda: yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": [POLICY_OBJECT]}
    ),
    "JSON": lambda: json.dumps(POLICY_OBJECT),
    "stream with empty documents": lambda: "---\n---\n" + yaml.safe_dump(POLICY_OBJECT),
}
all_policy_forms = pytest.mark.parametrize("form", sorted(POLICY_FORMS))


@all_policy_forms
def test_every_policy_form_renders_the_same_daemonsets(
    form: str, run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    reference = run(*dtk_files)
    files = list(dtk_files)
    files[1] = write("form.yaml", POLICY_FORMS[form]())
    result = run(*files)
    assert result.status == 0, result.err
    assert result.manifests == reference.manifests


def test_a_policy_from_stdin(
    run: Callable[..., Run], dtk_files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = run(*dtk_files)
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(SPEC)))
    files = list(dtk_files)
    files[1] = "-"
    result = run(*files)
    assert result.status == 0, result.err
    assert result.manifests == reference.manifests
    assert "from stdin" in result.err


def test_the_owner_reference_needs_the_policys_uid(
    run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    without = run(*dtk_files)
    assert all("ownerReferences" not in m["metadata"] for m in without.manifests)
    # the operator's label and applied hash are there all the same
    for manifest in without.manifests:
        assert manifest["metadata"]["labels"][labels.MANAGED_BY] == labels.MANAGED_BY_VALUE
        assert labels.APPLIED_HASH in manifest["metadata"]["annotations"]

    files = list(dtk_files)
    files[1] = write("owned.yaml", {**POLICY_OBJECT, "metadata": {"name": "cluster-policy", "uid": UID}})
    owned = run(*files)
    for manifest in owned.manifests:
        (reference,) = manifest["metadata"]["ownerReferences"]
        assert reference == {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "name": "cluster-policy",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def test_of_several_policies_the_operators_choice_or_the_named_one(
    run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    def policy(name: str, created: str, version: str) -> dict[str, Any]:
        return {
            **POLICY_OBJECT,
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"driver": {"version": version}},
        }

    both = write(
        "two.yaml",
        {
            "kind": "List",
            "items": [
                policy("newer", "2026-02-01T00:00:00Z", "570.124.06"),
                policy("older", "2025-01-01T00:00:00Z", "550.54.15"),
            ],
        },
    )
    files = list(dtk_files)
    files[1] = both
    # the oldest is the one the operator follows (planning/policies)
    active = run(*files)
    assert "ClusterPolicy older" in active.err
    assert "driver nvcr.io/nvidia/driver:550.54.15-rhcos4.16" in active.err
    named = run(*files, "--policy-name", "newer")
    assert "driver nvcr.io/nvidia/driver:570.124.06-rhcos4.16" in named.err
    unknown = run(*files, "--policy-name", "nope")
    assert unknown.status == 1 and "no ClusterPolicy named 'nope'" in unknown.err


# --- the same function as the reconciler --------------------------------------------------------


def test_the_output_is_what_the_driver_reconciler_applies(
    run: Callable[..., Run],
    write: Callable[..., str],
    dtk_files: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = list(dtk_files)
    files[1] = write("owned.yaml", {**POLICY_OBJECT, "metadata": {"name": "cluster-policy", "uid": UID}})
    rendered = run(*files, "--openshift-version", "4.16").manifests

    # The reconciler, fed the same cluster as its watches would hold it.
    applied: list[dict[str, Any]] = []
    monkeypatch.setattr(applying, "apply", lambda _client, manifest: applied.append(dict(manifest)))
    # nothing on the (absent) cluster to adopt (kube/adopting)
    monkeypatch.setattr(adopting, "adopt", lambda *_: "")
    rt = runtime.Runtime(
        api_client=None, namespace=labels.OPENSHIFT_NAMESPACE, env=releases.with_release_defaults({})
    )
    rt.view.node_facts = {facts.name: facts for facts in map(reading.node_facts, RHCOS_NODES["items"])}
    rt.view.dtk_imagestream = imagestream({V416: DTK_416, V417: DTK_417})
    rt.view.cluster_version = {"status": {"desired": {"version": "4.16.3"}}}
    owner = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy", "uid": UID}
    openshift = platforms.detect_platform({apis.CONFIG_GROUP, apis.IMAGE_GROUP})
    policy = policy_parser.parse_policy(SPEC)
    outcome = asyncio.run(
        driver_reconciler.reconcile_drivers(rt, rt.view.snapshot(), owner, policy, openshift, NOW)
    )

    assert outcome.errors == {} and applied

    # compared as printed: the same YAML documents, not just equal dicts; in the order of their
    # names (the reconciler applies them in stages, each stage's together: kube/applying.apply_all)
    def by_name(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            manifests, key=lambda m: (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])
        )

    assert render.dump_manifests(by_name(applied)) == render.dump_manifests(by_name(rendered))


def test_the_reconciler_renders_through_the_shared_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """If the reconciler stopped calling desired_driver_manifests, render would drift from it."""
    calls: list[driver_manifests.DriverView] = []
    original = driver_manifests.desired_driver_manifests

    def spy(*args: Any) -> Any:
        calls.append(args[2])
        return original(*args)

    monkeypatch.setattr(driver_manifests, "desired_driver_manifests", spy)
    monkeypatch.setattr(applying, "apply", lambda *_: None)
    monkeypatch.setattr(adopting, "adopt", lambda *_: "")
    rt = runtime.Runtime(api_client=None, namespace="ns", env=releases.with_release_defaults({}))
    kubernetes = platforms.detect_platform(set())
    asyncio.run(
        driver_reconciler.reconcile_drivers(
            rt, rt.view.snapshot(), {}, policy_parser.parse_policy({}), kubernetes, NOW
        )
    )
    assert len(calls) == 1 and calls[0].namespace == "ns"


# --- the stream ---------------------------------------------------------------------------------


def test_the_stream_is_in_apply_order_with_sorted_keys_and_stable(
    run: Callable[..., Run], dtk_files: list[str]
) -> None:
    first, second = run(*dtk_files), run(*dtk_files)
    assert first.out == second.out
    assert first.out.startswith("---\n")
    assert first.out.count("\n---\n") + 1 == len(first.all_manifests)
    kinds = [m["kind"] for m in first.manifests]
    # RBAC before the DaemonSets that use it
    assert kinds.index("ServiceAccount") < kinds.index("DaemonSet")
    assert kinds[-2:] == ["DaemonSet", "DaemonSet"]
    # The operator's order: the RuntimeClass first, the drivers, then the operands in DESIGN order.
    every = [(m["kind"], m["metadata"]["name"]) for m in first.all_manifests]
    assert every[0] == ("RuntimeClass", "nvidia")
    stack = [name for kind, name in every if kind == "DaemonSet" and not name.startswith("nvidia-driver-")]
    # NB: the node status exporter is off unless nodeStatusExporter.enabled (NVIDIA's default).
    # NB: and the VM operands unless sandboxWorkloads.enabled.
    default = policy_spec.Policy()
    assert stack == [o.daemonset for o in operand_catalog.GENERIC if o.is_enabled(default)]
    # sorted keys, as `kubectl get -o yaml` prints them
    for document in first.out.split("---\n")[1:]:
        top = [
            line.split(":")[0] for line in document.splitlines() if line and not line.startswith((" ", "-"))
        ]
        assert top == sorted(top)
    assert f"manifests: {len(first.all_manifests)} on stdout" in first.err
    assert (
        "operands: container-toolkit, operator-validator, device-plugin, mps-control-daemon, dcgm,"
        " dcgm-exporter, gpu-feature-discovery" in first.err
    )


HOSTILE = "a: b\n---\nkind: Secret\n# {{ x }} 'q' \"qq\" - item\u2028end"


def test_hostile_and_long_strings_round_trip_as_one_value(
    run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    long_value = ",".join(f"host{i}.example.com" for i in range(40))
    spec = {
        "driver": {
            "version": "550.90.07",
            "env": [{"name": "HOSTILE", "value": HOSTILE}, {"name": "LONG", "value": long_value}],
        }
    }
    files = list(dtk_files)
    files[1] = write("hostile.yaml", spec)
    result = run(*files)
    assert result.status == 0, result.err
    assert [m["kind"] for m in result.manifests].count("Secret") == 0
    for daemonset in result.daemonsets().values():
        env = env_of(containers(daemonset)["nvidia-driver-ctr"])
        assert env["HOSTILE"] == HOSTILE and env["LONG"] == long_value
    # not folded over several lines
    assert f"value: {long_value}\n" in result.out


# --- exit status ---------------------------------------------------------------------------------

INVALID_SPECS = {
    # validate_policy: a selector that does not parse
    "spec.driver.upgradePolicy.drain.podSelector": {
        "driver": {"upgradePolicy": {"drain": {"enable": True, "podSelector": "app in (a"}}}
    },
    # parse_policy: a shape the CRD schema would reject
    "spec.driver.version": {"driver": {"version": 550}},
    # an image that cannot be resolved
    "spec.driver.image": {"driver": {"image": "driver:550", "version": "550.90.07"}},
}


@pytest.mark.parametrize("field", sorted(INVALID_SPECS))
def test_an_invalid_policy_exits_2_naming_the_field_and_renders_nothing(
    field: str, run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    files = list(dtk_files)
    files[1] = write("invalid.yaml", {**POLICY_OBJECT, "spec": INVALID_SPECS[field]})
    result = run(*files)
    assert result.status == 2
    assert result.out == ""
    assert "invalid; nothing rendered" in result.err
    assert f"error {field}" in result.err
    assert "fix:" in result.err


def test_warnings_are_reported_and_do_not_stop_rendering(
    run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    upgrade = {"gpuPodDeletion": {"force": True}, "podDeletion": {"force": False}}
    spec = {"driver": {"version": "550.90.07", "upgradePolicy": upgrade}}
    files = list(dtk_files)
    files[1] = write("warn.yaml", spec)
    result = run(*files)
    assert result.status == 0
    assert "policy warnings:" in result.err
    assert "warning spec.driver.upgradePolicy.podDeletion.force: false is used;" in result.err
    assert len(result.daemonsets()) == 2


def test_a_sysctl_the_api_server_would_refuse_on_dcgm_is_named_with_both_fields(
    run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    # As the operator: nvidia-dcgm would get a 422, so it is held back and the policy is invalid.
    spec = {
        "daemonsets": {"podSecurityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]}},
        "dcgm": {"enabled": True, "hostNetwork": True},
    }
    files = list(dtk_files)
    files[1] = write("sysctl.yaml", {**POLICY_OBJECT, "spec": spec})
    result = run(*files)
    assert result.status == 2
    assert "error spec.daemonsets.podSecurityContext.sysctls[0].name" in result.err
    assert "spec.dcgm.hostNetwork" in result.err
    # the same sysctl without hostNetwork renders, nvidia-dcgm included
    spec["dcgm"] = {"enabled": True}
    files[1] = write("sysctl.yaml", {**POLICY_OBJECT, "spec": spec})
    assert run(*files).status == 0


UNREADABLE: dict[str, tuple[str, Any, str]] = {
    # (which option, content or None for a missing file, what the message says)
    "missing policy file": ("--policy", None, "cannot read the policy file"),
    "policy not YAML": ("--policy", "driver: [unclosed\n", "cannot read the policy file"),
    "policy of another kind": (
        "--policy",
        {"apiVersion": "v1", "kind": "ConfigMap"},
        "expected kind ClusterPolicy",
    ),
    "policy a list of strings": ("--policy", "- a\n- b\n", "expected a ClusterPolicy or its spec"),
    "missing nodes file": ("--nodes", None, "cannot read the nodes file"),
    "pods in the nodes file": (
        "--nodes",
        {"kind": "List", "items": [{"kind": "Pod"}]},
        "item 0 is a Pod, not a Node",
    ),
    "a node without a name": ("--nodes", {"kind": "Node", "metadata": {}}, "item 0 has no metadata.name"),
    "no ImageStream in the file": ("--imagestream", {"kind": "ConfigMap"}, "holds no ImageStream"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_unreadable_input_exits_1_naming_the_file(
    case: str, run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str], tmp_path: Path
) -> None:
    option, content, message = UNREADABLE[case]
    path = str(tmp_path / "absent.yaml") if content is None else write("bad.yaml", content)
    files = list(dtk_files)
    files[files.index(option) + 1] = path
    result = run(*files)
    assert result.status == 1
    assert result.out == ""
    assert message in result.err
    assert path in result.err


USAGE_ERRORS = {
    "no nodes": (["--policy", "p.yaml"], "needs --policy FILE and --nodes FILE"),
    "two stdins": (["--policy", "-", "--nodes", "-"], "only one input can come from stdin"),
    "bad version": (["--policy", "p", "--nodes", "n", "--openshift-version", "four"], "--openshift-version"),
    "nodes file in live mode": (["--live", "--nodes", "n.yaml"], "--nodes is for file mode"),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_a_contradictory_command_line_exits_2(case: str, run: Callable[..., Run]) -> None:
    argv, message = USAGE_ERRORS[case]
    result = run(*argv)
    assert result.status == 2 and result.out == ""
    assert message in result.err


def test_a_malformed_env_option_is_a_usage_error(run: Callable[..., Run]) -> None:
    with pytest.raises(SystemExit) as exited:
        run("--policy", "p", "--nodes", "n", "--env", "NO_EQUALS_SIGN")
    assert exited.value.code == 2


# --- options -------------------------------------------------------------------------------------


def test_env_overrides_the_release_defaults_as_the_deployment_would(
    run: Callable[..., Run], dtk_files: list[str], write: Callable[..., str]
) -> None:
    files = list(dtk_files)
    files[1] = write("bare.yaml", {})  # no version in the policy: DRIVER_IMAGE decides it all
    # by default the image the install sets (a digest names one image for every OS) ...
    default = run(*files)
    assert f"driver {releases.installed_images()['DRIVER_IMAGE']}, DTK" in default.err
    # ... or by the release's tag
    tagged = run(*files, "--tags")
    assert f"driver {releases.RELEASE_IMAGES['DRIVER_IMAGE']}-rhcos4.16" in tagged.err
    mirrored = run(*files, "--env", "DRIVER_IMAGE=mirror.example.com/nvidia/driver:550.127.05")
    assert "driver mirror.example.com/nvidia/driver:550.127.05-rhcos4.16" in mirrored.err
    assert "overridden by --env DRIVER_IMAGE" in mirrored.err
    broken = run(*files, "--env", "DRIVER_IMAGE=")
    assert broken.status == 2 and "spec.driver" in broken.err


def test_openshift_version_fills_in_for_nodes_without_the_label(
    run: Callable[..., Run], write: Callable[..., str]
) -> None:
    node = fake_nodes.gpu_node("gpu-a", rhcos=V416)
    del node["metadata"]["labels"][labels.OS_OPENSHIFT_VERSION]
    argv = [
        "--policy",
        write("p.yaml", POLICY_OBJECT),
        "--nodes",
        write("n.yaml", node),
        "--imagestream",
        write("i.yaml", imagestream({V416: DTK_416})),
    ]

    def openshift_version(result: Run) -> str:
        (daemonset,) = result.daemonsets().values()
        return env_of(containers(daemonset)["nvidia-driver-ctr"])["OPENSHIFT_VERSION"]

    assert openshift_version(run(*argv)) == ""
    assert openshift_version(run(*argv, "--openshift-version", "4.16.21")) == "4.16"


def test_namespace_option(run: Callable[..., Run], dtk_files: list[str]) -> None:
    result = run(*dtk_files, "--namespace", "gpu")
    assert {m["metadata"].get("namespace") for m in result.manifests} == {"gpu", None}
    assert "namespace: gpu" in result.err


def test_kubernetes_platform_despite_an_imagestream_file(
    run: Callable[..., Run], dtk_files: list[str]
) -> None:
    result = run(*dtk_files, "--platform", "kubernetes")
    assert result.status == 0
    # RHCOS nodes on a "vanilla" cluster: keyed by OS, no sidecar
    assert set(result.daemonsets()) == {
        "nvidia-driver-daemonset-rhcos4.16",
        "nvidia-driver-daemonset-rhcos4.17",
    }


def test_drivers_disabled_renders_no_driver_and_says_why(
    run: Callable[..., Run], write: Callable[..., str], dtk_files: list[str]
) -> None:
    files = list(dtk_files)
    files[1] = write("off.yaml", {"driver": {"enabled": False}, "gfd": {"enabled": False}})
    result = run(*files)
    assert result.status == 0 and result.manifests == []
    assert "spec.driver.enabled is false" in result.err
    # The rest of the stack is still rendered (on a preinstalled driver); a disabled operand is not.
    assert {m["metadata"]["name"] for m in result.all_manifests if m["kind"] == "DaemonSet"} == {
        o.daemonset
        for o in operand_catalog.GENERIC
        if o
        not in (
            operand_catalog.GPU_FEATURE_DISCOVERY,
            # off by default
            operand_catalog.NODE_STATUS_EXPORTER,
            operand_catalog.DRA_DRIVER,
            # sandboxWorkloads off by default
            operand_catalog.VFIO_MANAGER,
            operand_catalog.SANDBOX_VALIDATOR,
            operand_catalog.SANDBOX_DEVICE_PLUGIN,
            operand_catalog.VGPU_DEVICE_MANAGER,
        )
    }


POOL_LABEL = "example.com/gpu-pool"


def pool_nodes() -> dict[str, Any]:
    """Two pools (a, b), each with a node on each of two RHCOS versions, and a node of no pool."""
    found = []
    for name, pool, version in (
        ("a-416", "a", V416),
        ("a-417", "a", V417),
        ("b-416", "b", V416),
        ("b-417", "b", V417),
        ("z-416", "z", V416),
    ):
        found.append(
            fake_nodes.gpu_node(
                name, rhcos=version, os_version=f"4.{version[1:3]}", extra_labels={POOL_LABEL: pool}
            )
        )
    return node_list(*found)


def nvidia_driver_object(name: str, spec: dict[str, Any], day: int, uid: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {
            "name": name,
            "creationTimestamp": f"2026-01-0{day}T00:00:00Z",
            **({"uid": uid} if uid else {}),
        },
        "spec": spec,
    }


POOLS = [
    nvidia_driver_object("pool-a", {"version": "570.124.06", "nodeSelector": {POOL_LABEL: "a"}}, 1, "uid-a"),
    nvidia_driver_object(
        "pool-b",
        {"version": "550.90.07", "nodeSelector": {POOL_LABEL: "b"}, "labels": {"team": "inference"}},
        2,
        "uid-b",
    ),
]
POOL_POLICY = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy", "uid": UID},
    "spec": {"driver": {"useNvidiaDriverCRD": True}},
}


@pytest.fixture
def pool_files(write: Callable[..., str]) -> list[str]:
    return [
        "--policy",
        write("pool-policy.yaml", POOL_POLICY),
        "--nvidia-drivers",
        write("nvidia-drivers.yaml", POOLS, stream=True),
        "--nodes",
        write("pool-nodes.yaml", pool_nodes()),
        "--imagestream",
        write("dtk.yaml", imagestream({V416: DTK_416, V417: DTK_417})),
    ]


def test_nvidia_driver_pools_render_one_daemonset_per_pool_and_version(
    run: Callable[..., Run], pool_files: list[str]
) -> None:
    result = run(*pool_files)
    assert result.status == 0, result.err
    daemonsets = result.daemonsets()
    assert set(daemonsets) == {
        f"nvidia-gpu-driver-{pool}-{version}" for pool in ("pool-a", "pool-b") for version in (V416, V417)
    }
    for name, daemonset in daemonsets.items():
        pool = "pool-a" if "pool-a" in name else "pool-b"
        pod = daemonset["spec"]["template"]["spec"]
        # Each selects its pool's nodes by the owner label, and is owned by its NVIDIADriver.
        assert pod["nodeSelector"][labels.NVIDIA_DRIVER_OWNER] == pool
        (owner,) = daemonset["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("NVIDIADriver", pool, f"uid-{pool[-1]}")
        version = "570.124.06" if pool == "pool-a" else "550.90.07"
        assert containers(daemonset)["nvidia-driver-ctr"]["image"].startswith(
            f"{DRIVER.rsplit(':', 1)[0]}:{version}"
        )
    # No ClusterPolicy driver DaemonSet: in this mode the operator applies none.
    assert not any(name.startswith("nvidia-driver-daemonset") for name in daemonsets)
    # The shared driver RBAC once, owned by the ClusterPolicy.
    shared = [m for m in result.manifests if m["kind"] != "DaemonSet"]
    assert len({(m["kind"], m["metadata"]["name"]) for m in shared}) == len(shared) > 0
    assert all(m["metadata"]["ownerReferences"][0]["kind"] == "ClusterPolicy" for m in shared)
    # The summary: per NVIDIADriver its DaemonSets and nodes; the node no pool selects.
    assert "NVIDIADriver pool-a: 2 nodes" in result.err and "1 node (b-417)" in result.err
    assert "z-416" in result.err and "no NVIDIADriver selects them" in result.err
    # The rest of the stack is rendered as without the mode.
    assert operand_catalog.DEVICE_PLUGIN.daemonset in {
        m["metadata"]["name"] for m in result.all_manifests if m["kind"] == "DaemonSet"
    }


def test_nvidia_driver_pools_render_what_the_reconciler_applies(
    run: Callable[..., Run], pool_files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = run(*pool_files, "--openshift-version", "4.16").manifests

    # The NVIDIADriver reconciler, fed the same cluster as its watches would hold it.
    applied: list[dict[str, Any]] = []
    monkeypatch.setattr(applying, "apply", lambda _client, manifest: applied.append(dict(manifest)))
    # nothing on the (absent) cluster to adopt (kube/adopting)
    monkeypatch.setattr(adopting, "adopt", lambda *_: "")
    monkeypatch.setattr(labelling, "patch_node_labels", lambda *_: None)
    monkeypatch.setattr(reporting, "patch_nvidia_driver_status", lambda *_: None)
    monkeypatch.setattr(reporting, "post_event", lambda *_: None)
    rt = runtime.Runtime(
        api_client=None, namespace=labels.OPENSHIFT_NAMESPACE, env=releases.with_release_defaults({})
    )
    rt.view.node_facts = {facts.name: facts for facts in map(reading.node_facts, pool_nodes()["items"])}
    rt.view.nvidia_drivers = {d["metadata"]["name"]: reading.nvidia_driver(d) for d in POOLS}
    rt.view.dtk_imagestream = imagestream({V416: DTK_416, V417: DTK_417})
    rt.view.cluster_version = {"status": {"desired": {"version": "4.16.3"}}}
    owner = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy", "uid": UID}
    openshift = platforms.detect_platform({apis.CONFIG_GROUP, apis.IMAGE_GROUP})
    spec = POOL_POLICY["spec"]
    outcome = asyncio.run(
        nvidia_drivers.reconcile_nvidia_drivers(
            rt, rt.view.snapshot(), owner, spec, policy_parser.parse_policy(spec), openshift, NOW
        )
    )
    assert outcome.errors == {} and sum(m["kind"] == "DaemonSet" for m in applied) == 4
    # compared as printed: the same YAML stream, not just equal dicts
    assert render.dump_manifests(applied) == render.dump_manifests(rendered)


def test_nvidia_driver_pools_report_conflicts_refusals_and_bad_input_as_the_operator(
    run: Callable[..., Run], pool_files: list[str], write: Callable[..., str]
) -> None:
    files = list(pool_files)
    clash = nvidia_driver_object(
        "pool-c",
        {
            "version": "550.90.07",
            "nodeSelector": {POOL_LABEL: "a"},
            "upgradePolicy": {"maxParallelUpgrades": 2},
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]}]
                }
            },
        },
        3,
    )
    bad = nvidia_driver_object(
        "pool-bad", {"version": "not a version!", "nodeSelector": {POOL_LABEL: "z"}}, 4
    )
    files[3] = write("more.yaml", [*POOLS, clash, bad], stream=True)
    result = run(*files)
    # An invalid NVIDIADriver: the others are rendered (the operator applies them), exit 2.
    assert result.status == render.EXIT_INVALID
    assert len(result.daemonsets()) == 4
    assert not any("pool-bad" in name or "pool-c" in name for name in result.daemonsets())
    assert "error spec.version:" in result.err and "nothing applied or deleted for this pool" in result.err
    # The conflict as the NVIDIADrivers' condition says it, on both.
    assert "ConflictingNodeSelector: NVIDIADrivers pool-a and pool-c both select a-416, a-417" in result.err
    assert "so pool-c runs no driver there" in result.err
    # upgradePolicy is honoured per pool; nodeAffinity is not
    assert "UnsupportedSetting: spec.nodeAffinity: not acted on" in result.err
    assert "spec.upgradePolicy" not in result.err
    # The pool's own field path in a problem from the policy model (spec.version, not spec.driver.version).
    assert "spec.driver.version" not in result.err


def test_nvidia_drivers_in_the_policy_file_and_none_at_all(
    run: Callable[..., Run], pool_files: list[str], write: Callable[..., str]
) -> None:
    # `oc get clusterpolicy,nvidiadrivers -o yaml` in one file renders the same.
    together = [
        "--policy",
        write("together.yaml", {"apiVersion": "v1", "kind": "List", "items": [POOL_POLICY, *POOLS]}),
        *pool_files[4:],
    ]
    assert run(*together).out == run(*pool_files).out
    # The mode without any NVIDIADriver: no driver at all, and it says so.
    alone = run("--policy", pool_files[1], *pool_files[4:])
    assert alone.status == 0 and alone.daemonsets() == {}
    assert "no NVIDIADriver: no driver is deployed" in alone.err
    # NVIDIADrivers without the mode: the ClusterPolicy's drivers, and it says they deploy nothing.
    off = run("--policy", write("plain.yaml", POLICY_OBJECT), *pool_files[2:])
    assert off.status == 0 and "2 NVIDIADriver(s) deploy nothing" in off.err
    assert all(name.startswith(labels.DRIVER_DAEMONSET_PREFIX) for name in off.daemonsets())
    # A non-NVIDIADriver in the NVIDIADrivers file names the file.
    wrong = run(*pool_files[:3], write("wrong.yaml", POLICY_OBJECT), *pool_files[4:])
    assert wrong.status == render.EXIT_UNREADABLE and "not an NVIDIADriver" in wrong.err


def test_no_gpu_nodes_renders_only_the_rbac(run: Callable[..., Run], write: Callable[..., str]) -> None:
    result = run(
        "--policy",
        write("p.yaml", POLICY_OBJECT),
        "--nodes",
        write("n.yaml", node_list(fake_nodes.cpu_node("c"))),
    )
    assert result.status == 0 and result.manifests and not result.daemonsets()
    assert "driver DaemonSets: none" in result.err


def test_many_nodes_are_counted_not_all_listed(run: Callable[..., Run], write: Callable[..., str]) -> None:
    many = node_list(*(fake_nodes.vanilla_gpu_node(f"n{i:02}") for i in range(12)))
    result = run("--policy", write("p.yaml", POLICY_OBJECT), "--nodes", write("n.yaml", many))
    assert "12 nodes (n00, n01, n02, n03, n04, +7 more)" in result.err


# --- what the API server would refuse ---------------------------------------------------------


def test_a_misspelt_field_is_refused_with_the_close_name(
    run: Callable[..., Run], dtk_files: list[str], write: Callable[..., str]
) -> None:
    files = list(dtk_files)
    files[1] = write("typo.yaml", {**POLICY_OBJECT, "spec": {"driver": {"verison": "510.85.02"}}})
    result = run(*files)
    assert result.status != 0 and not result.out
    assert "spec.driver.verison: unknown field; did you mean spec.driver.version?" in result.err
    wrong_type = write(
        "type.yaml", {**POLICY_OBJECT, "spec": {"driver": {"upgradePolicy": {"autoUpgrade": "yes"}}}}
    )
    files[1] = wrong_type
    assert "spec.driver.upgradePolicy.autoUpgrade: must be boolean" in run(*files).err


@pytest.mark.parametrize("name", ["nvidia-clusterpolicy.yaml", "nvidia-operatorhub-clusterpolicy.yaml"])
def test_nvidia_policies_pass_the_structural_check(name: str) -> None:
    """No false refusal: NVIDIA's every-field and OperatorHub policies pass, as on the API server."""
    from ocp_gpu.commands import render as render_command
    from ocp_gpu.model.policy import structural

    document = yaml.safe_load((Path(__file__).parent / "data" / name).read_text())
    spec = document.get("spec", document)
    assert structural.schema_problems(render_command._crd_spec_schema(), spec) == []


def test_the_mig_manager_and_the_operator_metrics_objects_are_printed(
    run: Callable[..., Run], dtk_files: list[str], write: Callable[..., str]
) -> None:
    result = run(*dtk_files)
    assert result.status == 0, result.err
    every = {(m["kind"], m["metadata"]["name"]) for m in result.all_manifests}
    # The MIG manager with its RBAC and our default configs.
    assert {
        ("DaemonSet", "nvidia-mig-manager"),
        ("ConfigMap", "default-mig-parted-config"),
        ("ConfigMap", "default-gpu-clients"),
        ("ClusterRole", "ocp-gpu-nvidia-mig-manager"),
    } <= every
    # The operator's metrics: on OpenShift (from files) monitoring.coreos.com is assumed served.
    assert {("Service", "gpu-operator"), ("ServiceMonitor", "gpu-operator")} <= every
    assert any(kind == "PrometheusRule" for kind, _ in every)
    assert "mig-manager" in result.err
    # On vanilla Kubernetes from files: the Service, no ServiceMonitor or PrometheusRule.
    vanilla = run(
        "--policy", write("p.yaml", POLICY_OBJECT), "--nodes", write("n.yaml", UBUNTU_NODES, stream=True)
    )
    kinds = {m["kind"] for m in vanilla.all_manifests}
    assert ("Service", "gpu-operator") in {(m["kind"], m["metadata"]["name"]) for m in vanilla.all_manifests}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    # migManager.enabled: false renders none of its objects.
    off = dict(POLICY_OBJECT, spec={**POLICY_OBJECT["spec"], "migManager": {"enabled": False}})
    result = run("--policy", write("off.yaml", off), *dtk_files[2:])
    names = {m["metadata"]["name"] for m in result.all_manifests}
    assert not names & {"nvidia-mig-manager", "default-mig-parted-config", "ocp-gpu-nvidia-mig-manager"}


def test_offline_the_admins_named_config_maps_are_noted_not_checked(
    run: Callable[..., Run], dtk_files: list[str], write: Callable[..., str]
) -> None:
    # Offline render cannot know whether the named ConfigMaps exist: it renders the operands
    # mounting them and says, per field, which ConfigMap with which key the operator will want.
    spec = {
        **POLICY_OBJECT["spec"],
        "migManager": {"config": {"name": "admin-mig"}, "gpuClientsConfig": {"name": "admin-clients"}},
        "devicePlugin": {"config": {"name": "plugin-configs", "default": "a100"}},
        "dcgmExporter": {"config": {"name": "my-metrics"}},
    }
    result = run("--policy", write("named.yaml", dict(POLICY_OBJECT, spec=spec)), *dtk_files[2:])
    assert result.status == 0, result.err
    for field, name, key in (
        ("spec.migManager.config.name", "admin-mig", "config.yaml"),
        ("spec.migManager.gpuClientsConfig.name", "admin-clients", "clients.yaml"),
        ("spec.devicePlugin.config.name", "plugin-configs", "a100"),
        ("spec.dcgmExporter.config.name", "my-metrics", "dcgm-metrics.csv"),
    ):
        (line,) = [line for line in result.err.splitlines() if f"warning {field}:" in line]
        assert f"not checked offline: ConfigMap {name!r} must exist" in line
        assert f"with the key {key!r}" in line and "--live" in line
    daemonsets = {m["metadata"]["name"]: m for m in result.all_manifests if m["kind"] == "DaemonSet"}
    mig_volumes = daemonsets["nvidia-mig-manager"]["spec"]["template"]["spec"]["volumes"]
    assert {"admin-mig", "admin-clients"} <= {v["configMap"]["name"] for v in mig_volumes if "configMap" in v}
    # Nothing named: no note.
    plain = run(*dtk_files)
    assert "not checked offline" not in plain.err


# --- the images render shows are the ones the install runs and a mirror holds --------------------

REPO = Path(__file__).resolve().parents[2]
CSV_FILE = REPO / "bundle" / "manifests" / "ocp-gpu.clusterserviceversion.yaml"
OPERATORHUB_EXAMPLE = Path(__file__).parent / "data" / "nvidia-operatorhub-clusterpolicy.yaml"


def csv_document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CSV_FILE.read_text())
    return document


def csv_env() -> dict[str, str]:
    """The literal env of the CSV's operator Deployment (what OLM runs the operator with)."""
    (deployment,) = csv_document()["spec"]["install"]["spec"]["deployments"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {item["name"]: item["value"] for item in container["env"] if "value" in item}


def rendered_images(manifests: list[dict[str, Any]]) -> set[str]:
    """Every container image of every pod template, and every *_IMAGE env value passed down."""
    found: set[str] = set()
    for manifest in manifests:
        pod = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            found.add(container["image"])
            found |= {value for name, value in env_of(container).items() if name.endswith("_IMAGE")}
    return found


CLUSTER_POLICY_EXAMPLES = {
    "NVIDIA's OperatorHub example": lambda: yaml.safe_load(OPERATORHUB_EXAMPLE.read_text()),
    "our CSV's alm-examples": lambda: next(
        example
        for example in json.loads(csv_document()["metadata"]["annotations"]["alm-examples"])
        if example["kind"] == "ClusterPolicy"
    ),
}


@pytest.mark.parametrize("example", CLUSTER_POLICY_EXAMPLES.values(), ids=CLUSTER_POLICY_EXAMPLES.keys())
def test_every_image_rendered_under_the_csvs_env_is_in_its_related_images(
    example: Callable[[], dict[str, Any]],
    run: Callable[..., Run],
    dtk_files: list[str],
    write: Callable[..., str],
) -> None:
    """What `render` shows a disconnected admin is what oc-mirror copies (the CSV's relatedImages)."""
    related = {item["image"] for item in csv_document()["spec"]["relatedImages"]}
    files = list(dtk_files)
    files[1] = write("example.yaml", example())
    env = [arg for name, value in csv_env().items() for arg in ("--env", f"{name}={value}")]
    under_csv = run(*files, *env)
    assert under_csv.status == 0, under_csv.err
    # The Driver Toolkit images come with the OpenShift release (the driver-toolkit ImageStream).
    dtk = {DTK_416, DTK_417}
    images = rendered_images(under_csv.all_manifests)
    assert dtk <= images
    assert images - dtk <= related, sorted(images - dtk - related)
    # Every operand image the CSV pins is used by the example (nothing rendered by tag instead).
    # NB: but the DRA driver's (off unless draDriver.enabled) and the VM operands' (off unless
    # sandboxWorkloads.enabled): their images are in relatedImages.
    off_by_default = {
        "DRA_DRIVER_IMAGE",
        "VFIO_MANAGER_IMAGE",
        "SANDBOX_DEVICE_PLUGIN_IMAGE",
        "VGPU_DEVICE_MANAGER_IMAGE",
    }
    operand_images = {
        value for name, value in csv_env().items() if name.endswith("_IMAGE") and name not in off_by_default
    }
    assert operand_images <= images, sorted(operand_images - images)
    # Without --env, render's defaults are the same images: the output is the same.
    by_default = run(*files)
    assert by_default.out == under_csv.out


def test_each_digest_is_commented_with_its_release_tag_and_tags_on_request(
    run: Callable[..., Run], dtk_files: list[str]
) -> None:
    result = run(*dtk_files)
    tags = releases.release_tags()
    commented = [line for line in result.out.splitlines() if "@sha256:" in line and "# tag " in line]
    assert commented
    for line in commented:
        value, _, tag = line.partition("  # tag ")
        assert tags[value.split()[-1]] == tag
    # every release digest in the stream carries its comment
    assert all("# tag " in line for line in result.out.splitlines() if line.endswith(tuple(tags)))
    # --tags: the release's tags (with the OS suffix for the driver), no digest of the release
    tagged = run(*dtk_files, "--tags")
    assert tagged.status == 0, tagged.err
    assert "by tag (--tags)" in tagged.err
    assert not set(tags) & rendered_images(tagged.all_manifests)
    # NB: the DRA driver and the VM operands are off by default: their images are not rendered.
    assert set(releases.RELEASE_IMAGES.values()) - {
        releases.RELEASE_IMAGES["DRIVER_IMAGE"],
        releases.RELEASE_IMAGES["DRA_DRIVER_IMAGE"],
        releases.RELEASE_IMAGES["SANDBOX_DEVICE_PLUGIN_IMAGE"],
        releases.RELEASE_IMAGES["VGPU_DEVICE_MANAGER_IMAGE"],
    } <= (rendered_images(tagged.all_manifests))


def every_daemonset(result: Run) -> set[str]:
    return {m["metadata"]["name"] for m in result.all_manifests if m["kind"] == "DaemonSet"}


def test_a_gpu_cluster_in_the_policy_file_brings_its_dra_driver(
    run: Callable[..., Run], dtk_files: list[str], write: Callable[..., str]
) -> None:
    cluster = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"draDriver": {"computeDomains": {"enabled": False}}},
    }
    plugin = operand_catalog.DRA_DRIVER.app
    assert plugin not in every_daemonset(run(*dtk_files))
    # `oc get clusterpolicy,gpucluster -o yaml`: the GPUCluster owns the DRA driver, as in the operator.
    together = write("together.yaml", {"apiVersion": "v1", "kind": "List", "items": [POLICY_OBJECT, cluster]})
    owned = run("--policy", together, *dtk_files[2:])
    assert owned.status == 0, owned.err
    assert plugin in every_daemonset(owned)
    assert "GPUCluster gpu-cluster: owns the DRA driver" in owned.err
    # Beside a ClusterPolicy that turns draDriver on: refused, the ClusterPolicy's own renders.
    enabling = copy.deepcopy(POLICY_OBJECT)
    enabling["spec"]["draDriver"] = {"enabled": True}
    both = run("--policy", write("both.yaml", [enabling, cluster], stream=True), *dtk_files[2:])
    assert both.status == 0, both.err
    assert plugin in every_daemonset(both)
    assert "GPUCluster gpu-cluster: ClusterPolicyOwnsDRA" in both.err
