"""`ocp-gpu render`: print the driver manifests the operator would apply, as YAML.

For GitOps review (what would this ClusterPolicy deploy on these nodes?) and for
disconnected change review (what would the operator change on this cluster?).
The manifests come from the operator's own code path
(`desired.driver_manifests.desired_driver_manifests`, then the ownership
metadata of `kube.applying.owned`), so they are exactly what `ocp-gpu run`
applies.  The ownerReference is included when the ClusterPolicy's uid is known
(live mode, or a policy file with `metadata.uid`).

GitOps review, from files (no cluster needed)::

    oc get nodes -o yaml > nodes.yaml
    oc get is driver-toolkit -n openshift -o yaml > driver-toolkit.yaml
    ocp-gpu render --policy clusterpolicy.yaml --nodes nodes.yaml \\
        --imagestream driver-toolkit.yaml --openshift-version 4.16 > driver-manifests.yaml

  `--policy` takes a whole ClusterPolicy, `oc get clusterpolicy -o yaml`, or just a
  spec; `-` reads it from stdin.  With an ImageStream file the platform is OpenShift
  (Driver Toolkit builds: one DaemonSet per RHCOS version), without one it is vanilla
  Kubernetes (one DaemonSet per OS); `--platform` overrides.  Image defaults are the
  release's (`DRIVER_IMAGE=...` and friends); `--env DRIVER_IMAGE=<mirror>/driver:550.90.07`
  overrides one as the operator Deployment's env would.

Disconnected change review, against a live cluster, read-only (GET and LIST only)::

    ocp-gpu render --live --kubeconfig ~/.kube/config > current.yaml
    ocp-gpu render --live --kubeconfig ~/.kube/config --policy proposed.yaml > proposed.yaml
    diff -u current.yaml proposed.yaml

  Reads the ClusterPolicy the operator follows (or `--policy-name`; `--policy FILE`
  stands in for its spec), the nodes, the driver DaemonSets, the driver-toolkit
  ImageStream, ClusterVersion, Proxy and the operator Deployment's image env.  The
  summary marks each DaemonSet new, changed or unchanged and lists the stale ones
  the operator would delete.  Nothing is ever written.

Every operand is printed (pre-requisites, drivers, then the stack, the MIG manager
and its ConfigMaps included), then the operator's own metrics objects (Service,
ServiceMonitor and PrometheusRule where monitoring.coreos.com is served: discovered
live, assumed on OpenShift from files, as the DCGM exporter's ServiceMonitor; the
dashboard ConfigMap).

stdout: the manifests in apply order, one `---` document each, keys sorted as
`kubectl get -o yaml` sorts them (so the two diff cleanly).  stderr: the platform,
the strategy, one line per driver DaemonSet (name, key, nodes, driver image, DTK
image or "missing"), deletions (live), the planner's findings and the policy's
problems, each naming the field and the fix.

Exit status: 0 rendered; 1 an input file or the cluster could not be read (the
message names which); 2 the policy is invalid (the message names the field, and
nothing is rendered) or the command line is.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import functools
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO
from urllib.parse import quote

import yaml

from ocp_gpu import __version__
from ocp_gpu.desired import driver_manifests
from ocp_gpu.kube import applying, clients, discovering, reading, requesting
from ocp_gpu.model import (
    apis,
    custom_resources,
    images,
    labels,
    nodes,
    nvidia_driver,
    operands,
    policy_checks,
    policy_parser,
    releases,
    snapshot,
    structural,
)
from ocp_gpu.model import policy as policy_model
from ocp_gpu.model.problems import PolicyProblem, Severity
from ocp_gpu.planning import config_maps, driver_coverage, driver_strategy, drivers, monitoring, policies
from ocp_gpu.planning import platform as platform_model
from ocp_gpu.rendering import common as operand_common
from ocp_gpu.rendering import monitoring as monitoring_rendering
from ocp_gpu.rendering import operands as operand_rendering

EXIT_RENDERED: Final = 0
EXIT_UNREADABLE: Final = 1
EXIT_INVALID: Final = 2

_STDIN: Final = "-"
# NB: PyYAML folds strings longer than 80 columns; a folded NO_PROXY or image list diffs badly.
_NO_WRAP: Final = 2**31 - 1
# Node names shown per DaemonSet in the summary; at thousands of nodes the count says enough.
_NODES_SHOWN: Final = 5
_OPENSHIFT_VERSION: Final = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9A-Za-z.+-]+)?$")
# The keys that make a mapping a whole object rather than a bare spec (a spec has none of them).
_OBJECT_KEYS: Final = frozenset({"apiVersion", "kind", "metadata", "spec"})


class UsageError(Exception):
    """The command line asks for something contradictory or incomplete."""


class InputError(Exception):
    """An input file or the cluster could not be read; the message names which."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    files = parser.add_argument_group("file mode (GitOps review)")
    files.add_argument(
        "--policy",
        metavar="FILE",
        help="a ClusterPolicy (whole object, `oc get clusterpolicy -o yaml`, or just its spec); "
        "'-' for stdin.  In live mode it stands in for the cluster's policy",
    )
    files.add_argument("--nodes", metavar="FILE", help="`oc get nodes -o yaml`, or a YAML stream of Nodes")
    files.add_argument(
        "--imagestream", metavar="FILE", help="`oc get is driver-toolkit -n openshift -o yaml` (optional)"
    )
    files.add_argument(
        "--openshift-version",
        metavar="X.Y",
        help="ClusterVersion's version, for nodes whose NFD labels lack OPENSHIFT_VERSION",
    )
    live = parser.add_argument_group("live mode (change review; read-only)")
    live.add_argument("--live", action="store_true", help="read everything from the cluster (GET/LIST only)")
    live.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        metavar="PATH",
        help="implies --live (default: $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--policy-name",
        metavar="NAME",
        help="the ClusterPolicy to render, of several in the file or on the cluster "
        "(default: the one the operator follows, the oldest; normally cluster-policy)",
    )
    parser.add_argument(
        "--platform",
        choices=[kind.value for kind in platform_model.PlatformKind],
        default=None,
        help="default: openshift with an ImageStream file (live: detected), else kubernetes",
    )
    parser.add_argument(
        "--namespace", default=None, help="default: nvidia-gpu-operator on OpenShift, else gpu-operator"
    )
    parser.add_argument(
        "--env",
        metavar="KEY=VALUE",
        action="append",
        type=_env_pair,
        default=[],
        help="an operator env var, e.g. DRIVER_IMAGE=<registry>/driver:550.90.07 (repeatable; "
        "defaults: this release's images)",
    )


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return name.strip(), value


# --- what is rendered from -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PolicySource:
    """The ClusterPolicy to render, and where it came from."""

    # metadata.name; "" for a bare spec.
    name: str
    # metadata.uid; "" when unknown (a file without it): no ownerReference then.
    uid: str
    # As written: parse_policy checks its shape.
    spec: object
    # "file policy.yaml", "stdin", "the cluster", for the summary.
    origin: str

    @property
    def owner(self) -> dict[str, str] | None:
        """The ownerReference target, as the reconcile loop builds it."""
        if not (self.name and self.uid):
            return None
        return custom_resources.policy_ref(self.name, self.uid)

    def describe(self) -> str:
        return f"{apis.POLICY_KIND} {self.name or '(bare spec)'} from {self.origin}"


@dataclasses.dataclass(frozen=True)
class RenderInputs:
    policy: PolicySource
    platform: platform_model.Platform
    view: driver_manifests.DriverView
    # Live mode: the view's DaemonSets are the cluster's, so changes and deletions mean something.
    live: bool = False
    # Where the image defaults came from, for the summary.
    env_origin: str = ""
    # monitoring.coreos.com is served (live: discovered); None: assumed on OpenShift only.
    monitoring_api: bool | None = None

    @property
    def serves_monitoring(self) -> bool:
        return self.platform.is_openshift if self.monitoring_api is None else self.monitoring_api


@dataclasses.dataclass(frozen=True)
class Rendering:
    """The outcome: the manifests to print, or why there are none."""

    inputs: RenderInputs
    # validate_policy's problems, plus an unresolvable image found while planning.
    problems: tuple[PolicyProblem, ...]
    # None when the policy has errors or drivers are disabled.
    desired: driver_manifests.DriverManifests | None
    # In apply order, with the ownership metadata the operator adds.
    manifests: tuple[dict[str, Any], ...]
    drivers_enabled: bool = True
    # driver.useNvidiaDriverCRD: true: the NVIDIADriver resources own the driver DaemonSets.
    drivers_from_pools: bool = False

    @property
    def errors(self) -> tuple[PolicyProblem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.ERROR)


# --- rendering (pure) ------------------------------------------------------------------


def render(inputs: RenderInputs) -> Rendering:
    """Parse, validate, plan and render as one reconcile pass would.  Raises PolicyParseError."""
    spec = inputs.policy.spec
    if not isinstance(spec, Mapping):
        raise policy_parser.PolicyParseError("spec", "an object", spec)
    # First what the API server itself would refuse (a misspelt field, a wrong type): a
    # review must not pass what `kubectl apply` then rejects.
    refused = structural.schema_problems(_crd_spec_schema(), spec)
    if refused:
        return Rendering(inputs, _schema_errors(refused), None, ())
    policy = policy_parser.parse_policy(spec)
    problems = tuple(policy_checks.validate_policy(policy, inputs.view.env))
    if any(p.severity is Severity.ERROR for p in problems):
        # the operator applies nothing while the spec has errors: neither do we
        return Rendering(inputs, problems, None, ())
    owner = inputs.policy.owner
    stack, stack_problems = operand_manifests(policy, inputs)
    problems = (*problems, *stack_problems)
    stack_owned = tuple(with_ownership(manifest, owner) for manifest in stack)
    if not policy.driver.enabled:
        # driver.enabled: false: the operator deletes its driver DaemonSets and renders none
        return Rendering(inputs, problems, None, stack_owned, drivers_enabled=False)
    if nvidia_driver.is_mode_enabled(spec):
        # Printing the ClusterPolicy's own driver DaemonSets here would show what the
        # operator does NOT apply in this mode; the pools are not rendered (yet).
        return Rendering(inputs, problems, None, stack_owned, drivers_enabled=False, drivers_from_pools=True)
    desired = driver_manifests.desired_driver_manifests(policy, inputs.platform, inputs.view)
    if isinstance(desired, PolicyProblem):
        # an image only planning could not resolve (validate_policy normally catches it first)
        return Rendering(inputs, (*problems, desired), None, ())
    # The operator's order: pre-requisites and drivers, then the other operands (DESIGN section 4).
    manifests = (*stack_owned[:1], *(with_ownership(m, owner) for m in desired.manifests), *stack_owned[1:])
    return Rendering(inputs, problems, desired, manifests)


def operand_manifests(
    policy: policy_model.Policy, inputs: RenderInputs
) -> tuple[list[dict[str, Any]], list[PolicyProblem]]:
    """The pre-requisites (first) and every enabled operand but the driver, as the operator renders them."""
    namespace, openshift = inputs.view.namespace, inputs.platform.is_openshift
    manifests = operand_rendering.render_prerequisites(policy, namespace)
    problems: list[PolicyProblem] = []
    for operand in operands.GENERIC:
        spec = policy.components()[operand.section]
        if not spec.enabled:
            # <section>.enabled: false: the operator deletes its objects and renders none
            continue
        image = images.resolve_image(spec.image, component=operand.section, env=inputs.view.env)
        if isinstance(image, PolicyProblem):
            problems.append(image)
            continue
        named, required = operand_rendering.named_config_maps(operand, policy)
        if inputs.view.config_map_keys is None:
            # Offline: whether the admin's ConfigMaps exist cannot be known; say what must.
            problems += config_maps.unchecked_config_map_notes(named, namespace, required)
        else:
            # Live: the operator's own check; it applies nothing of the operand then.
            missing = config_maps.missing_config_map_problem(
                named, inputs.view.config_map_keys, namespace, required
            )
            if missing is not None:
                problems.append(missing)
                continue
        manifests += operand_rendering.render_operand(
            operand,
            policy,
            operand_common.OperandRenderInputs(
                namespace, openshift, image, monitoring_api=inputs.serves_monitoring
            ),
        )
    # Beside the operands: the operator's own metrics Service, ServiceMonitor, alerts and dashboard.
    groups = {monitoring.MONITORING_GROUP} if inputs.serves_monitoring else set()
    plan = monitoring.plan_operator_monitoring(policy, inputs.platform, groups, {})
    manifests += monitoring_rendering.render_monitoring_state(
        policy, monitoring_rendering.MonitoringRenderInputs(namespace, plan)
    )
    return manifests, problems


@functools.cache
def _crd_spec_schema() -> Mapping[str, Any]:
    """The packaged ClusterPolicy CRD's spec schema (the one source, ocp_gpu/crds/)."""
    text = (Path(__file__).resolve().parents[1] / "crds" / "clusterpolicies.nvidia.com.yaml").read_text()
    return structural.spec_schema(yaml.safe_load(text))


def _schema_errors(refused: Sequence[structural.SchemaProblem]) -> tuple[PolicyProblem, ...]:
    shown = [
        PolicyProblem(
            problem.path,
            problem.message,
            "the API server rejects this ClusterPolicy as written; correct the field",
        )
        for problem in refused[: structural.REPORTED]
    ]
    if len(refused) > structural.REPORTED:
        shown.append(PolicyProblem("spec", f"+{len(refused) - structural.REPORTED} more", "see above"))
    return tuple(shown)


def with_ownership(manifest: Mapping[str, Any], owner: Mapping[str, str] | None) -> dict[str, Any]:
    """The manifest as the operator applies it: `kube.applying.owned`, ownerReference only with a uid."""
    if owner is not None:
        return applying.owned(manifest, owner)
    # NB: a ClusterPolicy's uid exists only on the server; an ownerReference without one is
    # invalid, so it is left out and the rest (managed-by label, applied hash) kept.
    result = applying.owned(
        manifest, {"apiVersion": apis.POLICY_API_VERSION, "kind": apis.POLICY_KIND, "name": "", "uid": ""}
    )
    del result["metadata"]["ownerReferences"]
    return result


def dump_manifests(manifests: Sequence[Mapping[str, Any]]) -> str:
    """A YAML stream, one `---` document per manifest, keys sorted (as kubectl prints them)."""
    if not manifests:
        return ""
    return yaml.safe_dump_all(
        [dict(manifest) for manifest in manifests],
        explicit_start=True,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=_NO_WRAP,
    )


def summary_lines(result: Rendering) -> list[str]:
    """The stderr summary: short enough to read at a glance, each problem naming its fix."""
    inputs = result.inputs
    lines = [
        f"policy: {inputs.policy.describe()}",
        f"platform: {inputs.platform.value} ({inputs.platform.reason})",
        f"namespace: {inputs.view.namespace}",
        f"image defaults: {inputs.env_origin}",
    ]
    warnings = [p for p in result.problems if p.severity is not Severity.ERROR]
    if result.errors:
        lines.append("the ClusterPolicy is invalid; nothing rendered:")
        lines += [f"  {_problem(problem)}" for problem in result.errors]
        return lines + _warning_lines(warnings)
    if result.drivers_from_pools:
        lines.append(
            "spec.driver.useNvidiaDriverCRD is true: the NVIDIADriver resources deploy the drivers; "
            "their DaemonSets are not rendered here (see them with `ocp-gpu status`), every other operand is"
        )
        return lines + _warning_lines(warnings)
    if not result.drivers_enabled:
        lines.append(
            "spec.driver.enabled is false: no driver manifests; the operator deletes its driver DaemonSets"
        )
        if inputs.live:
            lines.append(_deletions([d.name for d in inputs.view.daemonsets]))
        return lines + _warning_lines(warnings)

    assert result.desired is not None  # rendered: see render()
    lines.append(_operands_line(result))
    plan = result.desired.plan
    lines.append(f"strategy: {result.desired.settings.strategy.value}")
    if plan.desired:
        lines.append(f"driver DaemonSets: {len(plan.desired)}")
    else:
        lines.append("driver DaemonSets: none (no GPU node could be keyed)")
    rendered = {
        str(m["metadata"]["name"]): m for m in result.desired.manifests if m.get("kind") == "DaemonSet"
    }
    existing = {d.name: d for d in inputs.view.daemonsets}
    # The nodes each DaemonSet selects (an admin's gpu.deploy.driver=false is not counted).
    coverage = driver_coverage.plan_driver_coverage(
        {facts.name: facts.labels for facts in inputs.view.node_facts}, plan.desired
    )
    for entry in plan.desired:
        change = _change(rendered.get(entry.name), existing.get(entry.name)) if inputs.live else ""
        lines.append(f"  {_daemonset_line(entry, coverage.selected.get(entry.name, ()))}{change}")
    if coverage.uncovered:
        lines.append(driver_coverage.describe_uncovered(coverage.uncovered, plan.findings))
    if inputs.live:
        lines.append(_deletions([f"{s.name} ({s.reason})" for s in plan.stale]))
    if plan.findings:
        lines.append("findings:")
        lines += [f"  {finding.reason}: {finding.message}" for finding in plan.findings]
    lines += _warning_lines(warnings)
    kinds = collections.Counter(str(m.get("kind")) for m in result.manifests)
    lines.append(
        f"manifests: {len(result.manifests)} on stdout ({', '.join(f'{n} {k}' for k, n in kinds.items())})"
    )
    return lines


def _operands_line(result: Rendering) -> str:
    """Which operands besides the driver are rendered, which are switched off."""
    rendered = {str(m["metadata"]["name"]) for m in result.manifests if m.get("kind") == "DaemonSet"}
    shown = [o.name for o in operands.GENERIC if o.daemonset in rendered]
    off = [o.name for o in operands.GENERIC if o.daemonset not in rendered]
    return f"operands: {', '.join(shown) or 'none'}" + (f" (not rendered: {', '.join(off)})" if off else "")


def _daemonset_line(entry: drivers.DesiredDriverDaemonSet, selected: Sequence[str]) -> str:
    shown = ", ".join(selected[:_NODES_SHOWN])
    if len(selected) > _NODES_SHOWN:
        shown += f", +{len(selected) - _NODES_SHOWN} more"
    count = f"{len(selected)} node{'s' if len(selected) != 1 else ''}"
    line = f"{entry.name}: key {entry.key}, {count} ({shown}), driver {entry.driver_image}"
    if entry.strategy is driver_strategy.Strategy.DTK:
        # a missing tag renders the driver image in the sidecar: say "missing", not that image
        line += f", DTK {'missing' if entry.image_missing else entry.dtk_image}"
    return line


def _change(manifest: Mapping[str, Any] | None, existing: snapshot.DriverDaemonSet | None) -> str:
    """What the operator would do to this DaemonSet: the same applied-hash test it makes."""
    if existing is None:
        return " [new]"
    if manifest is not None and existing.annotations.get(applying.APPLIED_HASH) == applying.applied_hash(
        manifest
    ):
        return " [unchanged]"
    return " [changed]"


def _deletions(names: Sequence[str]) -> str:
    return f"would delete: {', '.join(names)}" if names else "would delete: nothing"


def _warning_lines(warnings: Sequence[PolicyProblem]) -> list[str]:
    if not warnings:
        return []
    return ["policy warnings:", *(f"  {_problem(problem)}" for problem in warnings)]


def _problem(problem: PolicyProblem) -> str:
    return f"{problem.severity.value} {problem.field}: {problem.message} (fix: {problem.fix})"


# --- reading files -----------------------------------------------------------------------


def read_documents(path: str, what: str, stdin: TextIO | None = None) -> list[Any]:
    """Every YAML (or JSON) document in `path` ('-': stdin); InputError naming the file otherwise."""
    where = "stdin" if path == _STDIN else path
    try:
        text = (stdin or sys.stdin).read() if path == _STDIN else Path(path).read_text(encoding="utf-8")
        return list(yaml.safe_load_all(text))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise InputError(f"cannot read the {what} file {where}: {error}") from None


def _objects(documents: Sequence[Any]) -> list[Any]:
    """Documents with every List (`kubectl get -o yaml`, NodeList, ...) flattened into its items."""
    found: list[Any] = []
    for document in documents:
        if document is None:
            # an empty document (a stray `---`)
            continue
        if (
            isinstance(document, Mapping)
            and str(document.get("kind", "")).endswith("List")
            and isinstance(document.get("items"), list)
        ):
            found.extend(document["items"])
        else:
            found.append(document)
    return found


def policy_from_documents(documents: Sequence[Any], origin: str, wanted: str | None = None) -> PolicySource:
    """The ClusterPolicy (or bare spec) in a policy file; `wanted` picks one of several by name."""
    objects = _objects(documents)
    if not objects:
        raise InputError(f"{origin} holds no ClusterPolicy and no spec")
    for item in objects:
        if not isinstance(item, Mapping):
            raise InputError(f"{origin}: expected a ClusterPolicy or its spec, found {type(item).__name__}")
    whole = [item for item in objects if _OBJECT_KEYS & set(item)]
    if not whole:
        # a bare spec: `driver:`, `operator:` ... at the top level
        if len(objects) > 1:
            raise InputError(f"{origin}: {len(objects)} documents, none of them a ClusterPolicy")
        return PolicySource(name=wanted or "", uid="", spec=objects[0], origin=origin)
    if len(whole) != len(objects):
        raise InputError(f"{origin}: mixes ClusterPolicy objects with bare specs")
    for item in whole:
        if item.get("kind", apis.POLICY_KIND) != apis.POLICY_KIND:
            raise InputError(f"{origin}: expected kind {apis.POLICY_KIND}, found {item.get('kind')!r}")
    chosen = _choose_policy(whole, origin, wanted)
    found = reading.cluster_policy(chosen)
    return PolicySource(
        name=found.name or wanted or "", uid=found.uid, spec=_written_spec(chosen), origin=origin
    )


def _written_spec(obj: Mapping[str, Any]) -> object:
    """The spec as written.  NB: not the converter's (kube.reading.cluster_policy reads a spec that
    is not an object as {}): only a file can hold one, and render() refuses it naming the field."""
    spec = obj.get("spec")
    return {} if spec is None else spec


def _choose_policy(
    candidates: Sequence[Mapping[str, Any]], origin: str, wanted: str | None
) -> Mapping[str, Any]:
    by_name = {reading.cluster_policy(item).name: item for item in candidates}
    if wanted:
        if wanted in by_name:
            return by_name[wanted]
        if len(candidates) == 1 and not next(iter(by_name)):
            # one unnamed object: --policy-name names it
            return candidates[0]
        raise InputError(
            f"{origin} has no ClusterPolicy named {wanted!r} (found: {', '.join(sorted(by_name))})"
        )
    if len(candidates) == 1:
        return candidates[0]
    # several: the one the operator follows (the oldest), as planning/policies decides
    selection = policies.select_active_policy(
        [policies.PolicyRef(name, reading.cluster_policy(item).created) for name, item in by_name.items()]
    )
    assert selection.active is not None  # candidates is not empty
    return by_name[selection.active]


def node_facts_from_documents(documents: Sequence[Any], origin: str) -> tuple[nodes.NodeFacts, ...]:
    """Every Node in a nodes file, reduced as the operator's watch reduces them."""
    found: dict[str, nodes.NodeFacts] = {}
    for index, item in enumerate(_objects(documents)):
        if not isinstance(item, Mapping) or item.get("kind", "Node") != "Node":
            kind = item.get("kind") if isinstance(item, Mapping) else type(item).__name__
            raise InputError(f"{origin}: item {index} is a {kind}, not a Node")
        try:
            facts = reading.node_facts(item)
        except (AttributeError, TypeError, ValueError) as error:
            raise InputError(f"{origin}: item {index} is not a valid Node: {error}") from None
        if not facts.name:
            raise InputError(f"{origin}: item {index} has no metadata.name")
        found[facts.name] = facts
    return tuple(found.values())


def imagestream_from_documents(documents: Sequence[Any], origin: str) -> Mapping[str, Any]:
    """The driver-toolkit ImageStream in a file (the one so named, if the file holds several)."""
    streams = [
        item
        for item in _objects(documents)
        if isinstance(item, Mapping) and item.get("kind") == "ImageStream"
    ]
    named = [s for s in streams if (s.get("metadata") or {}).get("name") == labels.DTK_IMAGESTREAM_NAME]
    if len(streams) == 1 or len(named) == 1:
        return (named or streams)[0]
    if not streams:
        raise InputError(f"{origin} holds no ImageStream")
    raise InputError(f"{origin} holds {len(streams)} ImageStreams and none is {labels.DTK_IMAGESTREAM_NAME}")


def _cluster_version(version: str) -> dict[str, Any]:
    """A ClusterVersion carrying `version`, as reading.openshift_version reads it."""
    return {"status": {"desired": {"version": version}}}


def _default_namespace(platform: platform_model.Platform) -> str:
    return labels.OPENSHIFT_NAMESPACE if platform.is_openshift else labels.HELM_NAMESPACE


def _env(
    overrides: Sequence[tuple[str, str]], *, deployment: Mapping[str, str] | None = None
) -> tuple[dict[str, str], str]:
    """The operator env to render with, and where it came from: release < Deployment < --env."""
    env: dict[str, str] = {}
    origin = [f"ocp-gpu {__version__} release images"]
    if deployment:
        env |= deployment
        origin.append(f"the {labels.OPERATOR_DEPLOYMENT} Deployment's env")
    if overrides:
        env |= dict(overrides)
        origin.append("--env " + ", ".join(sorted({name for name, _ in overrides})))
    # The same defaulting as `ocp-gpu run` (operator.py): what is not set is the release's.
    return releases.with_release_defaults(env), ", overridden by ".join(origin)


def read_files(args: argparse.Namespace, stdin: TextIO | None = None) -> RenderInputs:
    """File mode: everything from the files named on the command line."""
    if not args.policy or not args.nodes:
        raise UsageError("file mode needs --policy FILE and --nodes FILE (or --live to read a cluster)")
    if [args.policy, args.nodes, args.imagestream].count(_STDIN) > 1:
        raise UsageError("only one input can come from stdin ('-')")
    if args.openshift_version and not _OPENSHIFT_VERSION.match(args.openshift_version):
        raise UsageError(f"--openshift-version: expected X.Y (e.g. 4.16), got {args.openshift_version!r}")
    policy_origin = "stdin" if args.policy == _STDIN else f"file {args.policy}"
    policy = policy_from_documents(
        read_documents(args.policy, "policy", stdin), policy_origin, args.policy_name
    )
    node_facts = node_facts_from_documents(
        read_documents(args.nodes, "nodes", stdin), f"nodes file {args.nodes}"
    )
    stream = None
    if args.imagestream:
        stream = imagestream_from_documents(
            read_documents(args.imagestream, "imagestream", stdin), f"imagestream file {args.imagestream}"
        )

    if args.platform:
        platform = platform_model.Platform(
            platform_model.PlatformKind(args.platform), f"--platform {args.platform}"
        )
    elif stream is not None:
        platform = platform_model.Platform(
            platform_model.PlatformKind.OPENSHIFT, "an ImageStream file was given"
        )
    else:
        platform = platform_model.Platform(
            platform_model.PlatformKind.KUBERNETES, "no ImageStream file; --platform openshift to change"
        )
    env, env_origin = _env(args.env)
    view = driver_manifests.DriverView(
        namespace=args.namespace or _default_namespace(platform),
        env=env,
        node_facts=node_facts,
        dtk_imagestream=stream,
        cluster_version=_cluster_version(args.openshift_version) if args.openshift_version else None,
    )
    return RenderInputs(policy, platform, view, live=False, env_origin=env_origin)


# --- reading a live cluster: GET and LIST only -------------------------------------------


@contextlib.contextmanager
def _reading(what: str, server: str) -> Iterator[None]:
    """Turn any failure to read `what` into an InputError naming it and the server."""
    try:
        yield
    except requesting.ApiException as error:
        raise InputError(f"cannot read {what} from {server}: {error.status} {error.reason}") from None
    except Exception as error:  # connection refused, TLS, a proxy: all mean "unreadable"
        raise InputError(f"cannot read {what} from {server}: {error}") from None


def _get(api_client: Any, path: str, *, missing_ok: tuple[int, ...] = (404,)) -> dict[str, Any] | None:
    """GET one object; None when the server answers with one of `missing_ok`."""
    try:
        found: dict[str, Any] = requesting.request(api_client, "GET", path)
    except requesting.ApiException as error:
        if error.status in missing_ok:
            return None
        raise
    return found


def read_live(args: argparse.Namespace, stdin: TextIO | None = None) -> RenderInputs:
    """Live mode: read what the operator's watches hold, with GET and LIST requests only."""
    for flag, value in (
        ("--nodes", args.nodes),
        ("--imagestream", args.imagestream),
        ("--openshift-version", args.openshift_version),
    ):
        if value:
            raise UsageError(f"{flag} is for file mode; live mode reads it from the cluster")
    proposed = None
    if args.policy:
        origin = "stdin" if args.policy == _STDIN else f"file {args.policy}"
        proposed = policy_from_documents(
            read_documents(args.policy, "policy", stdin), origin, args.policy_name
        )
    kubeconfig = args.kubeconfig
    try:
        api_client = clients.load_api_client(kubeconfig)
    except Exception as error:  # missing file, bad YAML, no current context: all unreadable
        raise InputError(f"cannot load the kubeconfig {kubeconfig or '(default)'}: {error}") from None
    server = str(api_client.configuration.host)
    with _reading("the API groups", server):
        groups = discovering.list_api_groups(api_client)
    if args.platform:
        platform = platform_model.Platform(
            platform_model.PlatformKind(args.platform), f"--platform {args.platform}"
        )
    else:
        platform = platform_model.detect_platform(groups)
    namespace = args.namespace or _default_namespace(platform)

    with _reading("ClusterPolicies", server):
        live_policies = _get(api_client, apis.POLICY_PATH)
    if live_policies is None and proposed is None:
        raise InputError(f"{server} serves no ClusterPolicy API (is the CRD installed?); give --policy FILE")
    candidates = [item for item in (live_policies or {}).get("items") or [] if isinstance(item, Mapping)]
    policy = _live_policy(candidates, proposed, args.policy_name, server)

    with _reading("nodes", server):
        node_facts = tuple(
            reading.node_facts(item) for item in requesting.list_items(api_client, "/api/v1/nodes")
        )
    with _reading(f"driver DaemonSets in {namespace}", server):
        daemonsets = tuple(
            reading.driver_daemonset(item)
            for item in requesting.list_items(
                api_client,
                f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
                # the operator's own watch selector (handlers.operator_settings)
                [
                    (
                        "labelSelector",
                        f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE},"
                        f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}",
                    )
                ],
            )
        )
    stream = cluster_version = proxy = None
    if apis.IMAGE_GROUP in groups:
        with _reading("the driver-toolkit ImageStream", server):
            stream = _get(
                api_client,
                f"/apis/{apis.IMAGE_GROUP}/v1/namespaces/{labels.DTK_IMAGESTREAM_NAMESPACE}"
                f"/imagestreams/{labels.DTK_IMAGESTREAM_NAME}",
            )
    if apis.CONFIG_GROUP in groups:
        with _reading("ClusterVersion and Proxy", server):
            cluster_version = _get(api_client, f"/apis/{apis.CONFIG_GROUP}/v1/clusterversions/version")
            proxy = _get(api_client, f"/apis/{apis.CONFIG_GROUP}/v1/proxies/cluster")
    with _reading("the operator Deployment", server):
        # NB: optional: a reviewer may not be allowed to read Deployments (403); release defaults then.
        deployment = _get(
            api_client,
            f"/apis/apps/v1/namespaces/{namespace}/deployments/{labels.OPERATOR_DEPLOYMENT}",
            missing_ok=(403, 404),
        )
    env, env_origin = _env(args.env, deployment=_deployment_env(deployment))
    view = driver_manifests.DriverView(
        namespace=namespace,
        env=env,
        node_facts=node_facts,
        daemonsets=daemonsets,
        dtk_imagestream=stream,
        cluster_version=cluster_version,
        cluster_proxy=proxy,
        config_map_keys=_config_map_keys(api_client, server, namespace, policy.spec),
    )
    return RenderInputs(
        policy,
        platform,
        view,
        live=True,
        env_origin=env_origin,
        monitoring_api=monitoring.MONITORING_GROUP in groups,
    )


def _config_map_keys(
    api_client: Any, server: str, namespace: str, spec: object
) -> dict[str, tuple[str, ...] | None]:
    """The keys of the ConfigMaps the policy names: the driver section's and every operand's."""
    try:
        policy = policy_parser.parse_policy(spec) if isinstance(spec, Mapping) else None
    except policy_parser.PolicyParseError:
        return {}  # render() reports the malformed spec
    if policy is None:
        return {}
    # The driver's (they decide its mounts) and every operand's (the operator checks them first).
    named = dict(driver_manifests.named_config_maps(policy))
    for operand in operands.GENERIC:
        named |= operand_rendering.named_config_maps(operand, policy)[0]
    found: dict[str, tuple[str, ...] | None] = {}
    with _reading(f"ConfigMaps in {namespace}", server):
        for name in named.values():
            path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}"
            body = _get(api_client, path)
            found[name] = (
                None
                if body is None
                else tuple(sorted({**(body.get("data") or {}), **(body.get("binaryData") or {})}))
            )
    return found


def _live_policy(
    candidates: Sequence[Mapping[str, Any]], proposed: PolicySource | None, wanted: str | None, server: str
) -> PolicySource:
    """The live ClusterPolicy to render, or the proposed file standing in for its spec."""
    name = wanted or (proposed.name if proposed else "")
    live: Mapping[str, Any] | None = None
    if candidates:
        by_name = {reading.cluster_policy(c).name: c for c in candidates}
        # a name (--policy-name, or the proposed file's) picks it; else the one the operator follows
        live = by_name.get(name) if name else _choose_policy(candidates, server, None)
    if proposed is not None:
        # the file replaces the spec of the live object of the same name (its uid stays)
        same_name = reading.cluster_policy(live or {})
        return dataclasses.replace(
            proposed,
            name=same_name.name or proposed.name,
            uid=same_name.uid or proposed.uid,
            origin=f"{proposed.origin}, on {server}",
        )
    if live is None:
        found = ", ".join(sorted(str((c.get("metadata") or {}).get("name")) for c in candidates)) or "none"
        raise InputError(f"{server} has no ClusterPolicy {name or ''} (found: {found}); give --policy FILE")
    chosen = reading.cluster_policy(live)
    return PolicySource(name=chosen.name, uid=chosen.uid, spec=_written_spec(live), origin=server)


def _deployment_env(deployment: Mapping[str, Any] | None) -> dict[str, str]:
    """The literal env of the operator Deployment's containers (valueFrom needs more reads: skipped)."""
    if deployment is None:
        return {}
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    env: dict[str, str] = {}
    for container in pod.get("containers") or []:
        for item in container.get("env") or []:
            if item.get("name") and "value" in item:
                env[str(item["name"])] = str(item["value"])
    return env


# --- the command ---------------------------------------------------------------------------


def read_inputs(args: argparse.Namespace, stdin: TextIO | None = None) -> RenderInputs:
    if args.live or args.kubeconfig is not None:
        return read_live(args, stdin)
    return read_files(args, stdin)


def main(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        inputs = read_inputs(args)
    except UsageError as error:
        print(f"ocp-gpu render: error: {error}", file=err)
        return EXIT_INVALID
    except InputError as error:
        print(f"ocp-gpu render: error: {error}", file=err)
        return EXIT_UNREADABLE
    try:
        result = render(inputs)
    except policy_parser.PolicyParseError as error:
        # a shape the CRD schema would reject: the server would never have stored it
        print(
            f"ocp-gpu render: the ClusterPolicy is invalid; nothing rendered:\n"
            f"  error {error} (fix: give {error.field} the type the ClusterPolicy CRD declares)",
            file=err,
        )
        return EXIT_INVALID
    for line in summary_lines(result):
        print(line, file=err)
    if result.errors:
        return EXIT_INVALID
    out.write(dump_manifests(result.manifests))
    out.flush()
    return EXIT_RENDERED
