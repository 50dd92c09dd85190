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
  release's (`DRIVER_IMAGE=...` and friends) by digest, exactly as the OLM bundle and the
  Helm chart set them (what a disconnected mirror holds: the CSV's relatedImages), each
  followed by a `# tag ...` comment naming the release tag; `--tags` renders the tags
  instead.  `--env DRIVER_IMAGE=<mirror>/driver:550.90.07` overrides one as the operator
  Deployment's env would.

Disconnected change review, against a live cluster, read-only (GET and LIST only)::

    ocp-gpu render --live --kubeconfig ~/.kube/config > current.yaml
    ocp-gpu render --live --kubeconfig ~/.kube/config --policy proposed.yaml > proposed.yaml
    diff -u current.yaml proposed.yaml

  Reads the ClusterPolicy the operator follows (or `--policy-name`; `--policy FILE`
  stands in for its spec), the nodes, the driver DaemonSets, the driver-toolkit
  ImageStream, ClusterVersion, Proxy and the operator Deployment's image env.  The
  summary marks each DaemonSet new, changed or unchanged and lists the stale ones
  the operator would delete.  Nothing is ever written.

NVIDIA's GPUClusters (live: the cluster's; those in the policy file stand in for them) count as
in the operator: the one accepted beside the ClusterPolicy brings its DRA driver into the
rendering, and each one's standing is a line of the summary (docs/dra.md).

With `driver.useNvidiaDriverCRD: true` the drivers are the NVIDIADriver pools' DaemonSets,
planned and rendered by the reconciler's own functions (desired/pool_manifests); the
NVIDIADrivers come from `--nvidia-drivers FILE` or the policy file (live: the cluster's, or
those files standing in for them).  An invalid NVIDIADriver is reported as its status would
say it and its pool is not rendered; the others are (exit 2).

The admins' ConfigMaps the operands mount (`migManager.config.name`, ...): live, checked as
the operator checks them (planning/config_maps); offline, a warning per field naming the
ConfigMap and the key that must exist.

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
nothing is rendered), an NVIDIADriver is (its pool is not rendered), or the command line is.
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
from ocp_gpu.desired import driver_manifests, pool_manifests, vgpu_manager_manifests
from ocp_gpu.kube import applying, clients, discovering, reading, requesting
from ocp_gpu.model import (
    apis,
    custom_resources,
    driver_snapshot,
    images,
    labels,
    nodes,
    nvidia_driver_spec,
    releases,
)
from ocp_gpu.model.policy import (
    api_values,
    gpu_cluster,
    policy_checks,
    policy_parser,
    policy_spec,
    structural,
)
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.planning import config_maps, platforms
from ocp_gpu.planning.drivers import driver_coverage, driver_plan, driver_pools, driver_strategy
from ocp_gpu.planning.operands import monitoring_planning, node_labels, workloads
from ocp_gpu.planning.status import policies
from ocp_gpu.rendering import monitoring_rendering
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering, vgpu_manager

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
    parser.add_argument(
        "--nvidia-drivers",
        metavar="FILE",
        help="NVIDIADrivers (`oc get nvidiadrivers -o yaml`, or a YAML stream), for "
        "driver.useNvidiaDriverCRD; those in the --policy file count too.  In live mode they "
        "stand in for the cluster's",
    )
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
        choices=[kind.value for kind in platforms.PlatformKind],
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
        "defaults: this release's images, by digest as the install sets them)",
    )
    parser.add_argument(
        "--tags",
        action="store_true",
        help="default to this release's images by tag instead of by digest (what is set, "
        "by --env or live by the Deployment, is used as it is)",
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
    platform: platforms.Platform
    view: driver_manifests.DriverView
    # Live mode: the view's DaemonSets are the cluster's, so changes and deletions mean something.
    live: bool = False
    # Where the image defaults came from, for the summary.
    env_origin: str = ""
    # monitoring.coreos.com is served (live: discovered); None: assumed on OpenShift only.
    monitoring_api: bool | None = None
    # The NVIDIADrivers (driver.useNvidiaDriverCRD), and where they came from.
    nvidia_drivers: tuple[nvidia_driver_spec.NvidiaDriver, ...] = ()
    nvidia_drivers_origin: str = ""
    # NVIDIA's GPUClusters (live: the cluster's; a policy file's stand in for them): the accepted
    # one brings its DRA driver, as in the operator (model/policy/gpu_cluster.decide_gpu_clusters).
    gpu_clusters: tuple[custom_resources.GpuClusterObject, ...] = ()

    @property
    def serves_monitoring(self) -> bool:
        return self.platform.is_openshift if self.monitoring_api is None else self.monitoring_api


@dataclasses.dataclass(frozen=True)
class RenderedPool:
    """One NVIDIADriver as the operator would reconcile it: its manifests, or why none."""

    driver: nvidia_driver_spec.NvidiaDriver
    # Errors (nothing applied or deleted for this pool) and warnings, in NVIDIADriver paths.
    problems: tuple[PolicyProblem, ...] = ()
    # None when its spec is invalid or a problem stops it.
    desired: driver_manifests.DriverManifests | None = None

    @property
    def errors(self) -> tuple[PolicyProblem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.ERROR)


@dataclasses.dataclass(frozen=True)
class PoolRendering:
    """Every NVIDIADriver's outcome, the node owners, and what the operator would delete (live)."""

    selection: pool_manifests.PoolSelection
    outcomes: tuple[RenderedPool, ...]
    # The ClusterPolicy's own driver DaemonSets the pools have replaced (live mode only).
    handover: driver_pools.Handover | None = None


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
    pools: PoolRendering | None = None

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
    decisions = gpu_cluster.decide_gpu_clusters(
        inputs.gpu_clusters, inputs.policy.name or apis.POLICY_KIND, policy, inputs.view.env
    )
    # the accepted GPUCluster's DRA driver, as the operator applies it; a refused one named
    policy = gpu_cluster.effective_policy(policy, decisions)
    problems = (*problems, *_gpu_cluster_notes(decisions))
    owner = inputs.policy.owner
    stack, stack_problems = operand_manifests(policy, inputs)
    problems = (*problems, *stack_problems)
    stack_owned = tuple(with_ownership(manifest, owner) for manifest in stack)
    if not policy.driver.enabled:
        # driver.enabled: false: the operator deletes its driver DaemonSets and renders none
        return Rendering(inputs, problems, None, stack_owned, drivers_enabled=False)
    if nvidia_driver_spec.is_mode_enabled(spec):
        # The NVIDIADrivers deploy the drivers: their pools' DaemonSets, as the operator applies them.
        pools, pool_manifest_list = render_pools(spec, inputs)
        manifests = (*stack_owned[:1], *pool_manifest_list, *stack_owned[1:])
        return Rendering(inputs, problems, None, manifests, pools=pools)
    desired = driver_manifests.desired_driver_manifests(policy, inputs.platform, inputs.view)
    if isinstance(desired, PolicyProblem):
        # an image only planning could not resolve (validate_policy normally catches it first)
        return Rendering(inputs, (*problems, desired), None, ())
    # The operator's order: pre-requisites and drivers, then the other operands (DESIGN section 4).
    manifests = (*stack_owned[:1], *(with_ownership(m, owner) for m in desired.manifests), *stack_owned[1:])
    return Rendering(inputs, problems, desired, manifests)


def _gpu_cluster_notes(decisions: Sequence[gpu_cluster.GpuClusterDecision]) -> tuple[PolicyProblem, ...]:
    """Each GPUCluster's standing, as a warning of the summary (its status says the same)."""
    return tuple(
        PolicyProblem(
            field=f"{apis.GPU_CLUSTER_KIND} {decision.name}",
            message=(
                "owns the DRA driver: its spec.draDriver is rendered"
                if decision.mapping is not None
                else f"{decision.verdict.reason}: {decision.verdict.message}"
            ),
            fix="none" if decision.mapping is not None else "see docs/dra.md (NVIDIA's GPUCluster)",
            severity=Severity.WARNING,
        )
        for decision in decisions
    )


def render_pools(
    cluster_policy_spec: Mapping[str, Any], inputs: RenderInputs
) -> tuple[PoolRendering, list[dict[str, Any]]]:
    """Every NVIDIADriver's pool through the reconciler's own functions (desired/pool_manifests).

    The pools' DaemonSets are owned by their NVIDIADriver; the RBAC and ConfigMaps every pool
    renders alike once, by the ClusterPolicy, as the reconciler applies them.  An invalid
    NVIDIADriver renders nothing (the operator leaves its pool as it is) and is reported.
    """
    view = inputs.view
    selection = pool_manifests.select_pools(
        inputs.nvidia_drivers, cluster_policy_spec, view.env, {f.name: f.labels for f in view.node_facts}
    )
    outcomes: list[RenderedPool] = []
    manifests: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for driver in selection.drivers:
        if driver.name in selection.invalid:
            # bad input: nothing applied or deleted for this pool
            outcomes.append(RenderedPool(driver, selection.invalid[driver.name]))
            continue
        extra = tuple(selection.default_problems(driver))
        desired = pool_manifests.desired_pool_manifests(
            driver,
            selection.policies[driver.name],
            inputs.platform,
            pool_manifests.pool_view(driver, selection.owners, view),
        )
        if isinstance(desired, PolicyProblem):
            outcomes.append(RenderedPool(driver, (*extra, desired)))
            continue
        outcomes.append(RenderedPool(driver, extra, desired))
        owner = driver.ref() if driver.uid else None
        shared = {id(m) for m in pool_manifests.shared_once(desired.manifests, seen)}
        # In the reconciler's apply order: the pool's manifests in turn, the shared ones once.
        for manifest in desired.manifests:
            if manifest["kind"] == "DaemonSet":
                manifests.append(with_ownership(manifest, owner))
            elif id(manifest) in shared:
                manifests.append(with_ownership(manifest, inputs.policy.owner))
    handover = None
    if inputs.live:
        # the ClusterPolicy's own DaemonSets go once the planned pools own all their nodes
        planned = [driver_pools.owner_label_value(o.driver.name) for o in outcomes if o.desired is not None]
        handover = driver_pools.plan_policy_handover(
            view.daemonsets,
            tuple(driver_snapshot.GpuNode.from_facts(f) for f in view.node_facts if f.is_gpu_node),
            selection.owners.owners,
            planned,
        )
    return PoolRendering(selection, tuple(outcomes), handover), manifests


def labelled_nodes(
    policy: policy_spec.Policy, node_facts: Sequence[nodes.NodeFacts]
) -> tuple[nodes.NodeFacts, ...]:
    """The nodes with the deploy labels the operator's labeller gives them (node_labels.plan_node_labels
    of the workload workloads.select_workload picks): a node's workload label decides its stack even
    where nothing labelled the node yet (a file of nodes).  A move a GPU pod could hold is not made
    (its pods are unknown here, as a pod the labeller has not read): the node keeps its labels."""
    labelled = []
    for facts in node_facts:
        workload = workloads.select_workload(facts.name, facts.labels, policy.sandbox_workloads).workload
        patch = (
            node_labels.plan_node_labels(facts.labels, operand_catalog.DEPLOY_LABELS, workload=workload) or {}
        )
        merged = {**facts.labels, **{k: v for k, v in patch.items() if v is not None}}
        for key in (k for k, v in patch.items() if v is None):
            merged.pop(key, None)
        labelled.append(dataclasses.replace(facts, labels=merged))
    return tuple(labelled)


def operand_manifests(
    policy: policy_spec.Policy, inputs: RenderInputs
) -> tuple[list[dict[str, Any]], list[PolicyProblem]]:
    """The pre-requisites (first) and every enabled operand but the driver, as the operator renders them."""
    namespace, openshift = inputs.view.namespace, inputs.platform.is_openshift
    manifests = operand_rendering.render_prerequisites(policy, namespace)
    problems: list[PolicyProblem] = []
    for operand in operand_catalog.GENERIC:
        spec = policy.components()[operand.section]
        if not operand.is_enabled(policy):
            # <section>.enabled: false: the operator deletes its objects and renders none
            continue
        image = images.resolve_image(spec.image, component=operand.section, env=inputs.view.env)
        if isinstance(image, PolicyProblem):
            problems.append(image)
            continue
        manager_image = operand_rendering.driver_manager_image(operand, policy, inputs.view.env)
        if isinstance(manager_image, PolicyProblem):
            problems.append(manager_image)
            continue
        clash = api_values.host_sysctl_problem(
            policy, operand.daemonset, operand_rendering.shared_host_namespaces(operand, policy)
        )
        if clash is not None:
            # the API server would refuse its pods' sysctls: the operator applies nothing of it
            problems.append(clash)
            continue
        named, required = operand_rendering.named_config_maps(operand, policy)
        if inputs.view.config_map_keys is None:
            # Offline: whether the admin's ConfigMaps exist cannot be known; say what must.
            # NB: once each: the plugin's ConfigMap is also the MPS daemon's and GFD's.
            problems += [
                note
                for note in config_maps.unchecked_config_map_notes(named, namespace, required)
                if note not in problems
            ]
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
                namespace,
                openshift,
                image,
                monitoring_api=inputs.serves_monitoring,
                wait_image=operand_rendering.wait_image(policy, inputs.view.env),
                driver_manager_image=manager_image,
            ),
        )
    if vgpu_manager.OPERAND.is_enabled(policy):
        # The vGPU manager's per-key DaemonSets, for the vm-vgpu nodes (nvidia.com/gpu.deploy.vgpu-manager
        # =true) as the operator plans them (the driver's way), once its labeller has labelled them.
        view = dataclasses.replace(inputs.view, node_facts=labelled_nodes(policy, inputs.view.node_facts))
        vgpu = vgpu_manager_manifests.desired_vgpu_manager_manifests(policy, inputs.platform, view)
        if isinstance(vgpu, PolicyProblem):
            problems.append(vgpu)
        else:
            manifests += vgpu.manifests
    # Beside the operands: the operator's own metrics Service, ServiceMonitor, alerts and dashboard.
    groups = {monitoring_planning.MONITORING_GROUP} if inputs.serves_monitoring else set()
    plan = monitoring_planning.plan_operator_monitoring(policy, inputs.platform, groups, {})
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


def with_tag_comments(stream: str, tags: Mapping[str, str]) -> str:
    """`stream` with `  # tag <reference>` after each line that ends in one of `tags`' digests.

    So a reviewer sees which release tag each pinned digest is; YAML ignores the comment.
    """
    lines = []
    for line in stream.splitlines(keepends=True):
        body = line.rstrip("\n")
        # NB: a plain scalar ends the line (dump_manifests never wraps or quotes a reference).
        tag = next((tags[digest] for digest in tags if body.endswith(digest)), None)
        lines.append(f"{body}  # tag {tag}\n" if tag else line)
    return "".join(lines)


def summary_lines(result: Rendering) -> list[str]:
    """The stderr summary: short enough to read at a glance, each problem naming its fix."""
    inputs = result.inputs
    lines = [
        f"policy: {inputs.policy.describe()}",
        f"platform: {inputs.platform.value} ({inputs.platform.reason})",
        f"namespace: {inputs.view.namespace}",
        f"image defaults: {inputs.env_origin}",
    ]
    if inputs.nvidia_drivers and not nvidia_driver_spec.is_mode_enabled(_spec_mapping(inputs.policy.spec)):
        # as each NVIDIADriver's status says then (state: disabled)
        lines.append(
            f"{len(inputs.nvidia_drivers)} NVIDIADriver(s) deploy nothing: the ClusterPolicy does not "
            "set spec.driver.useNvidiaDriverCRD: true"
        )
    warnings = [p for p in result.problems if p.severity is not Severity.ERROR]
    if result.errors:
        lines.append("the ClusterPolicy is invalid; nothing rendered:")
        lines += [f"  {_problem(problem)}" for problem in result.errors]
        return lines + _warning_lines(warnings)
    if result.pools is not None:
        lines.append(_operands_line(result))
        lines += _pool_lines(result.pools, inputs)
        lines += _warning_lines(warnings)
        return [*lines, _manifest_count(result)]
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
    lines.append(_manifest_count(result))
    return lines


def _spec_mapping(spec: object) -> Mapping[str, Any]:
    return spec if isinstance(spec, Mapping) else {}


def _manifest_count(result: Rendering) -> str:
    kinds = collections.Counter(str(m.get("kind")) for m in result.manifests)
    return f"manifests: {len(result.manifests)} on stdout ({', '.join(f'{n} {k}' for k, n in kinds.items())})"


def _pool_lines(pools: PoolRendering, inputs: RenderInputs) -> list[str]:
    """Per NVIDIADriver: its nodes and DaemonSets, or its problems; conflicts, refusals, deletions."""
    owners = pools.selection.owners
    origin = inputs.nvidia_drivers_origin or "nowhere"
    lines = [
        f"spec.driver.useNvidiaDriverCRD is true: the NVIDIADrivers deploy the drivers "
        f"({len(pools.outcomes)} from {origin})"
    ]
    if not pools.outcomes:
        lines.append(
            "  no NVIDIADriver: no driver is deployed (create one; `default: true` takes every GPU node)"
        )
    # The nodes as they will be labelled: each with its owner (the DaemonSets select on it).
    labelled = {
        facts.name: {
            **{k: v for k, v in facts.labels.items() if k != labels.NVIDIA_DRIVER_OWNER},
            **(
                {labels.NVIDIA_DRIVER_OWNER: owners.owners[facts.name]} if facts.name in owners.owners else {}
            ),
        }
        for facts in inputs.view.node_facts
    }
    existing = {d.name: d for d in inputs.view.daemonsets}
    deletions: list[str] = []
    findings: list[str] = []
    for outcome in pools.outcomes:
        driver = outcome.driver
        value = driver_pools.owner_label_value(driver.name)
        count = len(owners.nodes_of(value))
        lines.append(f"NVIDIADriver {driver.name}: {count} node{'s' if count != 1 else ''}")
        if outcome.errors:
            # what the operator puts in its status (InvalidSpec) and an InvalidNVIDIADriver Event
            lines.append("  invalid; nothing applied or deleted for this pool (the operator reports it so):")
        lines += [f"  {_problem(problem)}" for problem in outcome.problems]
        if outcome.desired is not None:
            plan = outcome.desired.plan
            rendered = {
                str(m["metadata"]["name"]): m
                for m in outcome.desired.manifests
                if m.get("kind") == "DaemonSet"
            }
            coverage = driver_coverage.plan_driver_coverage(labelled, plan.desired)
            for entry in plan.desired:
                change = _change(rendered.get(entry.name), existing.get(entry.name)) if inputs.live else ""
                lines.append(f"  {_daemonset_line(entry, coverage.selected.get(entry.name, ()))}{change}")
            if not plan.desired:
                lines.append("  driver DaemonSets: none (no GPU node of this pool could be keyed)")
            deletions += [f"{s.name} ({s.reason})" for s in plan.stale]
            findings += [f"  {driver.name}: {f.reason}: {f.message}" for f in plan.findings]
        for conflict in owners.conflicts_of(value):
            lines.append(f"  {conflict.reason}: {conflict.message_for(value)}")
        for path, instead in nvidia_driver_spec.refused_settings(driver.spec).items():
            lines.append(f"  UnsupportedSetting: {path}: not acted on, {instead}")
    unowned = pool_manifests.unowned_finding(owners)
    if unowned is not None:
        findings.append(f"  {unowned.reason}: {unowned.message}")
    if pools.handover is not None:
        deletions += [
            f"{name} (the ClusterPolicy's: NVIDIADrivers own its nodes)" for name in pools.handover.delete
        ]
        findings += [f"  {kept.reason}: {kept.message}" for kept in pools.handover.kept]
    if inputs.live:
        lines.append(_deletions(deletions))
    if findings:
        lines += ["findings:", *findings]
    return lines


def _operands_line(result: Rendering) -> str:
    """Which operands besides the driver are rendered, which are switched off."""
    rendered = {str(m["metadata"]["name"]) for m in result.manifests if m.get("kind") == "DaemonSet"}
    shown = [o.name for o in operand_catalog.GENERIC if o.daemonset in rendered]
    off = [o.name for o in operand_catalog.GENERIC if o.daemonset not in rendered]
    return f"operands: {', '.join(shown) or 'none'}" + (f" (not rendered: {', '.join(off)})" if off else "")


def _daemonset_line(entry: driver_plan.DesiredDriverDaemonSet, selected: Sequence[str]) -> str:
    shown = ", ".join(selected[:_NODES_SHOWN])
    if len(selected) > _NODES_SHOWN:
        shown += f", +{len(selected) - _NODES_SHOWN} more"
    count = f"{len(selected)} node{'s' if len(selected) != 1 else ''}"
    line = f"{entry.name}: key {entry.key}, {count} ({shown}), driver {entry.driver_image}"
    if entry.strategy is driver_strategy.Strategy.DTK:
        # a missing tag renders the driver image in the sidecar: say "missing", not that image
        line += f", DTK {'missing' if entry.image_missing else entry.dtk_image}"
    return line


def _change(manifest: Mapping[str, Any] | None, existing: driver_snapshot.DriverDaemonSet | None) -> str:
    """What the operator would do to this DaemonSet: the same applied-hash test it makes."""
    if existing is None:
        return " [new]"
    if manifest is not None and existing.annotations.get(labels.APPLIED_HASH) == applying.applied_hash(
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
    """The ClusterPolicy (or bare spec) in a policy file; `wanted` picks one of several by name.

    NVIDIADrivers beside it are left out here (`nvidia_drivers_from_documents` reads them).
    """
    objects = [
        item for item in _objects(documents) if not _is_nvidia_driver(item) and not _is_gpu_cluster(item)
    ]
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


def _is_nvidia_driver(item: object) -> bool:
    return isinstance(item, Mapping) and item.get("kind") == apis.NVIDIA_DRIVER_KIND


def _is_gpu_cluster(item: object) -> bool:
    return isinstance(item, Mapping) and item.get("kind") == apis.GPU_CLUSTER_KIND


def gpu_clusters_from_documents(documents: Sequence[Any]) -> tuple[custom_resources.GpuClusterObject, ...]:
    """The GPUClusters in a policy file, beside its ClusterPolicy."""
    return tuple(reading.gpu_cluster(item) for item in _objects(documents) if _is_gpu_cluster(item))


def nvidia_drivers_from_documents(
    documents: Sequence[Any], origin: str, *, only: bool = False
) -> tuple[nvidia_driver_spec.NvidiaDriver, ...]:
    """The NVIDIADrivers in a file; `only`: the file is for NVIDIADrivers, anything else is an error."""
    found: dict[str, nvidia_driver_spec.NvidiaDriver] = {}
    for index, item in enumerate(_objects(documents)):
        if not _is_nvidia_driver(item):
            if only:
                kind = item.get("kind") if isinstance(item, Mapping) else type(item).__name__
                raise InputError(f"{origin}: item {index} is a {kind}, not an {apis.NVIDIA_DRIVER_KIND}")
            continue
        driver = reading.nvidia_driver(item)
        if not driver.name:
            raise InputError(f"{origin}: {apis.NVIDIA_DRIVER_KIND} item {index} has no metadata.name")
        if not isinstance(item.get("spec", {}), Mapping):
            raise InputError(f"{origin}: {apis.NVIDIA_DRIVER_KIND} {driver.name}: spec is not an object")
        found[driver.name] = driver
    return tuple(found.values())


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


def _default_namespace(platform: platforms.Platform) -> str:
    return labels.OPENSHIFT_NAMESPACE if platform.is_openshift else labels.HELM_NAMESPACE


def _env(
    overrides: Sequence[tuple[str, str]],
    *,
    deployment: Mapping[str, str] | None = None,
    by_tag: bool = False,
) -> tuple[dict[str, str], str]:
    """The operator env to render with, and where it came from: release < Deployment < --env."""
    env: dict[str, str] = {}
    form = "by tag (--tags)" if by_tag else "by digest, as installed"
    origin = [f"ocp-gpu {__version__} release images {form}"]
    if deployment:
        env |= deployment
        origin.append(f"the {labels.OPERATOR_DEPLOYMENT} Deployment's env")
    if overrides:
        env |= dict(overrides)
        origin.append("--env " + ", ".join(sorted({name for name, _ in overrides})))
    # The same defaulting as `ocp-gpu run` (operator.py): what is not set is the release's.
    return releases.with_release_defaults(env, by_tag=by_tag), ", overridden by ".join(origin)


def read_files(args: argparse.Namespace, stdin: TextIO | None = None) -> RenderInputs:
    """File mode: everything from the files named on the command line."""
    if not args.policy or not args.nodes:
        raise UsageError("file mode needs --policy FILE and --nodes FILE (or --live to read a cluster)")
    if [args.policy, args.nodes, args.imagestream, args.nvidia_drivers].count(_STDIN) > 1:
        raise UsageError("only one input can come from stdin ('-')")
    if args.openshift_version and not _OPENSHIFT_VERSION.match(args.openshift_version):
        raise UsageError(f"--openshift-version: expected X.Y (e.g. 4.16), got {args.openshift_version!r}")
    policy_origin = "stdin" if args.policy == _STDIN else f"file {args.policy}"
    policy_documents = read_documents(args.policy, "policy", stdin)
    policy = policy_from_documents(policy_documents, policy_origin, args.policy_name)
    pools, pools_origin = _file_nvidia_drivers(args, policy_documents, policy_origin, stdin)
    node_facts = node_facts_from_documents(
        read_documents(args.nodes, "nodes", stdin), f"nodes file {args.nodes}"
    )
    stream = None
    if args.imagestream:
        stream = imagestream_from_documents(
            read_documents(args.imagestream, "imagestream", stdin), f"imagestream file {args.imagestream}"
        )

    if args.platform:
        platform = platforms.Platform(platforms.PlatformKind(args.platform), f"--platform {args.platform}")
    elif stream is not None:
        platform = platforms.Platform(platforms.PlatformKind.OPENSHIFT, "an ImageStream file was given")
    else:
        platform = platforms.Platform(
            platforms.PlatformKind.KUBERNETES, "no ImageStream file; --platform openshift to change"
        )
    env, env_origin = _env(args.env, by_tag=args.tags)
    view = driver_manifests.DriverView(
        namespace=args.namespace or _default_namespace(platform),
        env=env,
        node_facts=node_facts,
        dtk_imagestream=stream,
        cluster_version=_cluster_version(args.openshift_version) if args.openshift_version else None,
    )
    return RenderInputs(
        policy,
        platform,
        view,
        live=False,
        env_origin=env_origin,
        nvidia_drivers=pools,
        nvidia_drivers_origin=pools_origin,
        gpu_clusters=gpu_clusters_from_documents(policy_documents),
    )


def _file_nvidia_drivers(
    args: argparse.Namespace, policy_documents: Sequence[Any], policy_origin: str, stdin: TextIO | None
) -> tuple[tuple[nvidia_driver_spec.NvidiaDriver, ...], str]:
    """The NVIDIADrivers of the policy file and of --nvidia-drivers (which wins on a name), and whence."""
    found = {d.name: d for d in nvidia_drivers_from_documents(policy_documents, policy_origin)}
    origins = [policy_origin] if found else []
    if args.nvidia_drivers:
        origin = "stdin" if args.nvidia_drivers == _STDIN else f"file {args.nvidia_drivers}"
        documents = read_documents(args.nvidia_drivers, "NVIDIADrivers", stdin)
        found |= {d.name: d for d in nvidia_drivers_from_documents(documents, origin, only=True)}
        origins.append(origin)
    return tuple(found.values()), " and ".join(origins)


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
    proposed_pools: tuple[nvidia_driver_spec.NvidiaDriver, ...] | None = None
    pools_origin = ""
    proposed_clusters: tuple[custom_resources.GpuClusterObject, ...] = ()
    if args.policy or args.nvidia_drivers:
        if args.policy:
            origin = "stdin" if args.policy == _STDIN else f"file {args.policy}"
            documents = read_documents(args.policy, "policy", stdin)
            proposed = policy_from_documents(documents, origin, args.policy_name)
            proposed_clusters = gpu_clusters_from_documents(documents)
        else:
            documents, origin = [], ""
        files, pools_origin = _file_nvidia_drivers(args, documents, origin, stdin)
        # NVIDIADrivers in the files stand in for the cluster's (all of them)
        proposed_pools = files if pools_origin else None
    kubeconfig = args.kubeconfig
    try:
        api_client = clients.load_api_client(kubeconfig)
    except Exception as error:  # missing file, bad YAML, no current context: all unreadable
        raise InputError(f"cannot load the kubeconfig {kubeconfig or '(default)'}: {error}") from None
    server = api_client.credentials.server
    with _reading("the API groups", server):
        groups = discovering.list_api_groups(api_client)
    if args.platform:
        platform = platforms.Platform(platforms.PlatformKind(args.platform), f"--platform {args.platform}")
    else:
        platform = platforms.detect_platform(groups)
    namespace = args.namespace or _default_namespace(platform)

    with _reading("ClusterPolicies", server):
        live_policies = _get(api_client, apis.POLICY_PATH)
    if live_policies is None and proposed is None:
        raise InputError(f"{server} serves no ClusterPolicy API (is the CRD installed?); give --policy FILE")
    candidates = [item for item in (live_policies or {}).get("items") or [] if isinstance(item, Mapping)]
    policy = _live_policy(candidates, proposed, args.policy_name, server)

    listed = None
    if proposed_pools is not None or nvidia_driver_spec.is_mode_enabled(_spec_mapping(policy.spec)):
        # NB: only when they matter: a reviewer may not be allowed to list them otherwise.
        with _reading("NVIDIADrivers", server):
            listed = _get(api_client, apis.NVIDIA_DRIVER_PATH)
    live_pools = tuple(
        reading.nvidia_driver(item) for item in (listed or {}).get("items") or [] if isinstance(item, Mapping)
    )
    if proposed_pools is not None:
        # a file's NVIDIADriver keeps the uid and age of the cluster's of the same name
        by_name = {d.name: d for d in live_pools}
        pools = tuple(
            dataclasses.replace(d, uid=by_name[d.name].uid, created=by_name[d.name].created)
            if d.name in by_name
            else d
            for d in proposed_pools
        )
        pools_origin = f"{pools_origin}, on {server}"
    else:
        pools, pools_origin = live_pools, server

    gpu_clusters = proposed_clusters
    if not gpu_clusters:
        with _reading("GPUClusters", server):
            # NB: optional: absent where NVIDIA's CRD is not installed, or a reviewer may not list them.
            listed_clusters = _get(
                api_client,
                f"/apis/{apis.GPU_CLUSTER_API_VERSION}/{apis.GPU_CLUSTER_PLURAL}",
                missing_ok=(403, 404),
            )
        gpu_clusters = tuple(
            reading.gpu_cluster(item)
            for item in (listed_clusters or {}).get("items") or []
            if isinstance(item, Mapping)
        )
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
    env, env_origin = _env(args.env, deployment=_deployment_env(deployment), by_tag=args.tags)
    view = driver_manifests.DriverView(
        namespace=namespace,
        env=env,
        node_facts=node_facts,
        daemonsets=daemonsets,
        dtk_imagestream=stream,
        cluster_version=cluster_version,
        cluster_proxy=proxy,
        config_map_keys=_config_map_keys(api_client, server, namespace, policy.spec, pools, env),
    )
    return RenderInputs(
        policy,
        platform,
        view,
        live=True,
        env_origin=env_origin,
        monitoring_api=monitoring_planning.MONITORING_GROUP in groups,
        nvidia_drivers=pools,
        nvidia_drivers_origin=pools_origin,
        gpu_clusters=gpu_clusters,
    )


def _config_map_keys(
    api_client: Any,
    server: str,
    namespace: str,
    spec: object,
    pools: Sequence[nvidia_driver_spec.NvidiaDriver] = (),
    env: Mapping[str, str] | None = None,
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
    for operand in operand_catalog.GENERIC:
        named |= operand_rendering.named_config_maps(operand, policy)[0]
    if pools and isinstance(spec, Mapping) and nvidia_driver_spec.is_mode_enabled(spec):
        # each pool's driver section names its own
        selection = pool_manifests.select_pools(pools, spec, env or {}, {})
        named |= {f"pool/{name}": name for name in pool_manifests.config_map_names(selection)}
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
    out.write(with_tag_comments(dump_manifests(result.manifests), releases.release_tags()))
    out.flush()
    if result.pools is not None and any(o.errors for o in result.pools.outcomes):
        # as the operator: the other pools are applied, the invalid ones left as they are
        print("ocp-gpu render: an NVIDIADriver is invalid (above); its pool is not rendered", file=err)
        return EXIT_INVALID
    return EXIT_RENDERED
