"""The conformance diff: ocp-gpu's rendering of a captured case against NVIDIA's (the fixtures of
hack/capture_nvidia_conformance.py), per operand container and field, and the differences that
docs/differences-from-nvidia.md lists.

A difference is keyed (operand, container, field), without the values: the document says why
ocp-gpu differs there, for every policy where it does.  Operands are DaemonSets by name, except
the driver DaemonSets (one per RHCOS build, kernel or pool, named differently by each operator for
pools): they are the operand `driver`, paired by the nodes they run on.  Pod-level fields have the
container `-`; a DaemonSet or container only one side renders is the field `present`.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.commands import render
from ocp_gpu.desired import driver_manifests
from ocp_gpu.kube import reading
from ocp_gpu.model import releases
from ocp_gpu.planning import platforms

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "unit" / "data" / "nvidia-conformance"
DOC = REPO / "docs" / "differences-from-nvidia.md"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
OPENSHIFT_VERSION = "4.16.3"  # the harness's ClusterVersion (ocp_gpu_harness.openshift)
DRIVER = "driver"
POD = "-"
# The pod fields compared besides the containers'.
POD_FIELDS = (
    "tolerations",
    "nodeSelector",
    "affinity",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "runtimeClassName",
    "priorityClassName",
    "serviceAccountName",
)


@dataclasses.dataclass(frozen=True, order=True)
class Key:
    operand: str
    container: str
    field: str

    def __str__(self) -> str:
        return f"{self.operand} / {self.container} / {self.field}"


@dataclasses.dataclass(frozen=True)
class Difference:
    key: Key
    case: str
    ours: object
    nvidia: object

    def __str__(self) -> str:
        return f"[{self.case}] {self.key}: ocp-gpu {self.ours!r} != NVIDIA {self.nvidia!r}"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    header: Mapping[str, Any]
    nvidia: tuple[Mapping[str, Any], ...]


def cases() -> list[Case]:
    found = []
    for path in sorted(DATA.glob("*.yaml")):
        if path.name == "cases.yaml":
            continue
        header, *objects = yaml.safe_load_all(path.read_text())
        found.append(Case(header["case"], header, tuple(objects)))
    return found


def case_names() -> list[str]:
    return [c["name"] for c in yaml.safe_load((DATA / "cases.yaml").read_text())["cases"]]


# --- ocp-gpu's rendering of a case -----------------------------------------------------------


def proxy_object(proxy: Mapping[str, str]) -> dict[str, Any]:
    """Proxy `cluster` as the harness sets it (ocp_gpu_harness.openshift.set_cluster_proxy)."""
    internal = [".cluster.local", ".svc", "10.0.0.0/24", "10.244.0.0/16", "127.0.0.1", "localhost"]
    return {
        "metadata": {"name": "cluster"},
        "spec": {
            "httpProxy": proxy["http"],
            "httpsProxy": proxy["https"],
            "noProxy": proxy["noProxy"],
            "trustedCA": {"name": proxy["trustedCA"]},
        },
        "status": {
            "httpProxy": proxy["http"],
            "httpsProxy": proxy["https"],
            "noProxy": ",".join([*proxy["noProxy"].split(","), *internal]),
        },
    }


def imagestream(builds: Iterable[str]) -> dict[str, Any]:
    """openshift/driver-toolkit with a tag per RHCOS build, as the capture script sets them."""
    tags = [
        {"name": build, "from": {"kind": "DockerImage", "name": DTK + f"{i + 1}" * 64}}
        for i, build in enumerate(sorted(builds))
    ]
    return {"metadata": {"name": "driver-toolkit", "namespace": "openshift"}, "spec": {"tags": tags}}


def render_case(case: Case) -> render.Rendering:
    header = case.header
    openshift = header["platform"] == "openshift"
    platform = platforms.Platform(
        platforms.PlatformKind.OPENSHIFT if openshift else platforms.PlatformKind.KUBERNETES, "the case"
    )
    node_facts = tuple(reading.node_facts(n) for n in header["nodes"])
    builds = {f.labels.get("feature.node.kubernetes.io/system-os_release.OSTREE_VERSION") for f in node_facts}
    objects = header.get("objects") or []
    config_maps = {
        o["metadata"]["name"]: tuple(o.get("data") or {}) for o in objects if o["kind"] == "ConfigMap"
    }
    view = driver_manifests.DriverView(
        namespace=header["namespace"],
        env=releases.with_release_defaults({}),
        node_facts=node_facts,
        dtk_imagestream=imagestream(b for b in builds if b) if openshift else None,
        cluster_version={"status": {"desired": {"version": OPENSHIFT_VERSION}}} if openshift else None,
        cluster_proxy=proxy_object(header["proxy"]) if header.get("proxy") else None,
        config_map_keys=config_maps,
    )
    policy = header["clusterPolicy"]
    inputs = render.RenderInputs(
        render.PolicySource(policy["metadata"]["name"], "", copy.deepcopy(policy["spec"]), "the case"),
        platform,
        view,
        nvidia_drivers=render.nvidia_drivers_from_documents(objects, "the case"),
    )
    return render.render(inputs)


# --- comparing ------------------------------------------------------------------------------


def _daemonsets(objects: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == "DaemonSet"}


def _is_driver(daemonset: Mapping[str, Any]) -> bool:
    template_labels = daemonset["spec"]["template"]["metadata"].get("labels") or {}
    return template_labels.get("app.kubernetes.io/component") == "nvidia-driver"


def _selects(daemonset: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    selector = daemonset["spec"]["template"]["spec"].get("nodeSelector") or {}
    node_labels = node["metadata"]["labels"]
    affinity = daemonset["spec"]["template"]["spec"].get("affinity") or {}
    terms = (
        affinity.get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    if any(node_labels.get(k) != v for k, v in selector.items()):
        return False
    return not terms or any(
        all(_matches(e, node_labels) for e in t.get("matchExpressions", [])) for t in terms
    )


def _matches(expression: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    key, op, values = expression["key"], expression["operator"], expression.get("values", [])
    if op == "In":
        return node_labels.get(key) in values
    if op == "NotIn":
        return node_labels.get(key) not in values
    if op == "Exists":
        return key in node_labels
    if op == "DoesNotExist":
        return key not in node_labels
    return False


def _node_set(daemonset: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    # NB: the nodes as created, without the deploy labels either operator adds (both add them all).
    return frozenset(n["metadata"]["name"] for n in nodes if _selects_ignoring_deploy(daemonset, n))


def _selects_ignoring_deploy(daemonset: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    stripped = copy.deepcopy(daemonset)
    selector = stripped["spec"]["template"]["spec"].get("nodeSelector") or {}
    for key in [k for k in selector if k.startswith("nvidia.com/gpu")]:
        del selector[key]
    return _selects(stripped, node)


def paired_daemonsets(
    ours: Iterable[Mapping[str, Any]], nvidia: Iterable[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> Iterator[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]]:
    """(operand, ours, NVIDIA's): by name; driver DaemonSets by the nodes they select."""
    mine, theirs = _daemonsets(ours), _daemonsets(nvidia)
    my_drivers = {_node_set(d, nodes): d for d in mine.values() if _is_driver(d)}
    their_drivers = {_node_set(d, nodes): d for d in theirs.values() if _is_driver(d)}
    for node_set in sorted(my_drivers.keys() | their_drivers.keys(), key=sorted):
        yield DRIVER, my_drivers.get(node_set), their_drivers.get(node_set)
    names = {n for n, d in mine.items() if not _is_driver(d)} | {
        n for n, d in theirs.items() if not _is_driver(d)
    }
    for name in sorted(names):
        yield name, mine.get(name), theirs.get(name)


def _volumes(pod: Mapping[str, Any]) -> dict[str, object]:
    """Each volume's source, without its name (the names differ and mean nothing)."""
    return {
        v["name"]: _defaulted({k: val for k, val in v.items() if k != "name"})
        for v in pod.get("volumes") or []
    }


def _defaulted(value: Any) -> Any:
    """As the API server would store it: a hostPath's `type: ""`, a fieldRef's `apiVersion: v1` and
    a ConfigMap or Secret volume's `defaultMode: 420` are its defaults (NVIDIA's fixtures are as
    served, ours as rendered)."""
    if isinstance(value, Mapping):
        out = {k: _defaulted(v) for k, v in value.items()}
        if "path" in out and out.get("type") == "":
            del out["type"]
        if "fieldPath" in out and out.get("apiVersion") == "v1":
            del out["apiVersion"]
        if ("items" in out or "name" in out or "secretName" in out) and out.get("defaultMode") == 0o644:
            del out["defaultMode"]  # a configMap or secret volume's default file mode
        return out
    if isinstance(value, list):
        return [_defaulted(v) for v in value]
    return value


def same_image(image: object) -> object:
    """`repo:tag@sha256:...` and `repo@sha256:...` pull the same image: compared by digest."""
    if isinstance(image, str) and "@" in image:
        name, digest = image.split("@", 1)
        if ":" in name.rsplit("/", 1)[-1]:
            name = name.rsplit(":", 1)[0]
        return f"{name}@{digest}"
    return image


def _mounts(container: Mapping[str, Any], volumes: Mapping[str, object]) -> dict[str, object]:
    found: dict[str, object] = {}
    for mount in container.get("volumeMounts") or []:
        found[mount["mountPath"]] = {
            **{k: v for k, v in mount.items() if k not in ("name", "mountPath")},
            "source": volumes.get(mount["name"]),
        }
    return found


def _env(container: Mapping[str, Any]) -> dict[str, object]:
    return {e["name"]: _defaulted(e.get("value", e.get("valueFrom"))) for e in container.get("env") or []}


def container_fields(container: Mapping[str, Any], volumes: Mapping[str, object]) -> dict[str, object]:
    fields: dict[str, object] = {
        "image": same_image(container.get("image")),
        "command": container.get("command"),
        "args": container.get("args"),
        "securityContext": container.get("securityContext"),
    }
    fields |= {f"env {name}": value for name, value in _env(container).items()}
    fields |= {f"volumeMount {path}": value for path, value in _mounts(container, volumes).items()}
    return fields


def _containers(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = {c["name"]: c for c in pod.get("containers") or []}
    found |= {f"init:{c['name']}": c for c in pod.get("initContainers") or []}
    return found


def _normal(value: object) -> object:
    # An empty list, map or string is as good as none: neither operator means anything by it.
    return None if value in ([], {}, "", False) else value


def _toleration_order(toleration: object) -> str:
    return repr(sorted(toleration.items())) if isinstance(toleration, Mapping) else repr(toleration)


def compare_daemonsets(
    case: str, operand: str, ours: Mapping[str, Any] | None, nvidia: Mapping[str, Any] | None
) -> Iterator[Difference]:
    if ours is None or nvidia is None:
        yield Difference(Key(operand, POD, "present"), case, ours is not None, nvidia is not None)
        return
    my_pod, their_pod = ours["spec"]["template"]["spec"], nvidia["spec"]["template"]["spec"]
    for field in POD_FIELDS:
        mine, theirs = _normal(my_pod.get(field)), _normal(their_pod.get(field))
        if field == "tolerations":
            # NB: by content, whatever the order of each toleration's keys.
            mine = sorted(mine or [], key=_toleration_order) or None  # type: ignore[arg-type]
            theirs = sorted(theirs or [], key=_toleration_order) or None  # type: ignore[arg-type]
        if mine != theirs:
            yield Difference(Key(operand, POD, field), case, mine, theirs)
    if ours["spec"]["selector"] != nvidia["spec"]["selector"] and operand != DRIVER:
        yield Difference(
            Key(operand, POD, "selector"), case, ours["spec"]["selector"], nvidia["spec"]["selector"]
        )
    my_containers, their_containers = _containers(my_pod), _containers(their_pod)
    my_volumes, their_volumes = _volumes(my_pod), _volumes(their_pod)
    for name in sorted(my_containers.keys() | their_containers.keys()):
        mine_c, theirs_c = my_containers.get(name), their_containers.get(name)
        if mine_c is None or theirs_c is None:
            yield Difference(Key(operand, name, "present"), case, mine_c is not None, theirs_c is not None)
            continue
        my_fields, their_fields = (
            container_fields(mine_c, my_volumes),
            container_fields(theirs_c, their_volumes),
        )
        for field in sorted(my_fields.keys() | their_fields.keys()):
            mine, theirs = _normal(my_fields.get(field)), _normal(their_fields.get(field))
            if mine != theirs:
                yield Difference(Key(operand, name, field), case, mine, theirs)


def compare_named(
    case: str, kind: str, ours: Iterable[Mapping[str, Any]], nvidia: Iterable[Mapping[str, Any]]
) -> Iterator[Difference]:
    """ConfigMaps and RuntimeClasses: by name, what they hold (data; handler)."""
    mine = {o["metadata"]["name"]: o for o in ours if o.get("kind") == kind}
    theirs = {o["metadata"]["name"]: o for o in nvidia if o.get("kind") == kind}
    for name in sorted(mine.keys() | theirs.keys()):
        operand = f"{kind} {name}"
        if name not in mine or name not in theirs:
            yield Difference(Key(operand, POD, "present"), case, name in mine, name in theirs)
            continue
        if kind == "RuntimeClass":
            if mine[name].get("handler") != theirs[name].get("handler"):
                yield Difference(
                    Key(operand, POD, "handler"), case, mine[name]["handler"], theirs[name]["handler"]
                )
            continue
        my_data, their_data = mine[name].get("data") or {}, theirs[name].get("data") or {}
        for file in sorted(my_data.keys() | their_data.keys()):
            if _content(file, my_data.get(file)) != _content(file, their_data.get(file)):
                yield Difference(
                    Key(operand, POD, f"data {file}"), case, my_data.get(file), their_data.get(file)
                )


def _content(file: str, text: str | None) -> object:
    # YAML files by what they say, not how they are indented.
    if text is not None and file.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    return text


def differences(case: Case) -> list[Difference]:
    rendering = render_case(case)
    assert not rendering.errors, [str(e) for e in rendering.errors]
    ours = rendering.manifests
    found: list[Difference] = []
    for operand, mine, theirs in paired_daemonsets(ours, case.nvidia, case.header["nodes"]):
        found += compare_daemonsets(case.name, operand, mine, theirs)
    # NB: the admin's own ConfigMaps (the case's objects) are in NVIDIA's namespace, not rendered.
    admins = {o["metadata"]["name"] for o in case.header.get("objects") or [] if o["kind"] == "ConfigMap"}
    nvidia = [o for o in case.nvidia if not (o["kind"] == "ConfigMap" and o["metadata"]["name"] in admins)]
    for kind in ("RuntimeClass", "ConfigMap"):
        found += compare_named(case.name, kind, ours, nvidia)
    return found


# --- the document ---------------------------------------------------------------------------

# A row of a differences table: | operand | container | field | ... |, the key in backticks.
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|(.*)\|\s*$")


def documented(text: str | None = None) -> dict[Key, str]:
    """The differences docs/differences-from-nvidia.md lists: key -> its reason."""
    found: dict[Key, str] = {}
    for line in (text if text is not None else DOC.read_text()).splitlines():
        match = _ROW.match(line)
        if match:
            key = Key(match[1], match[2], match[3])
            assert key not in found, f"{key} is listed twice in {DOC.name}"
            found[key] = match[4].strip()
    return found


def row_for(key: Key, rows: Mapping[Key, str]) -> Key | None:
    """The document's row that covers `key`: the exact one, else the first whose `*` patterns match."""
    if key in rows:
        return key
    for row in rows:
        if all(
            fnmatch.fnmatchcase(part, pattern)
            for part, pattern in zip(
                (key.operand, key.container, key.field), (row.operand, row.container, row.field), strict=True
            )
        ):
            return row
    return None
