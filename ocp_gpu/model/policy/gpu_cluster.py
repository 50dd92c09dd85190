"""NVIDIA's `GPUCluster` (nvidia.com/v1alpha1, NVIDIA's operator v26.7.0
`api/nvidia/v1alpha1/gpucluster_types.go`) mapped onto the ClusterPolicy's `draDriver`.

One DRA operand renders for both resources: a GPUCluster's `spec.draDriver` is rewritten into
the ClusterPolicy's `draDriver` wire shape (`dra_driver_section`) and read by the same parser
(`gpu_cluster_dra_driver`), so the renderer never knows which resource asked for it.

Coexistence (docs/dra.md "NVIDIA's GPUCluster"): NVIDIA refuses a GPUCluster while any
ClusterPolicy exists. ocp-gpu deploys the driver and toolkit the DRA driver needs from the
ClusterPolicy, so it allows a GPUCluster beside one whose `draDriver.enabled` is false: the
GPUCluster then owns the DRA operand. It refuses (`gpu_cluster_verdict`) a GPUCluster beside a
ClusterPolicy that enables `draDriver` itself, a second GPUCluster (the oldest one owns the
operand; NVIDIA's CRD already refuses any name but `gpu-cluster`), a GPUCluster whose spec the
DRA operand cannot use (`decide_gpu_cluster`), and waits while no ClusterPolicy exists. A
refusal changes nothing that runs.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence

from ocp_gpu.model import custom_resources
from ocp_gpu.model.policy.policy_checks import validate_policy
from ocp_gpu.model.policy.policy_parser import PolicyParseError, parse_policy
from ocp_gpu.model.policy.policy_problems import Severity
from ocp_gpu.model.policy.policy_spec import DraDriverSpec, Policy

# NVIDIA's default health-check port of the gpus kubelet plugin, the one the operand renders.
NVIDIA_HEALTHCHECK_PORT = 51516

# draDriver's image fields, the same names in both resources.
_IMAGE_FIELDS = ("repository", "image", "version", "imagePullPolicy", "imagePullSecrets", "featureGates")
# GPUCluster sections the ClusterPolicy's own sections configure instead (docs/dra.md).
_POLICY_OWNED_SECTIONS = ("dcgm", "dcgmExporter", "daemonsets", "hostPaths")


class GpuClusterError(ValueError):
    """A GPUCluster field of the wrong shape (only possible off-server); names the GPUCluster field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuClusterMapping:
    """What a GPUCluster asks of the DRA operand, and the fields it sets that do not apply here."""

    dra_driver: DraDriverSpec
    # GPUCluster wire paths set but not applied by the DRA operand, each with why.
    not_applied: tuple[str, ...] = ()


def _as_mapping(value: object, field: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise GpuClusterError(field, f"expected an object, got {value!r}")
    return {str(key): item for key, item in value.items()}


def _container(section: Mapping[str, object]) -> dict[str, object]:
    return {name: section[name] for name in ("env", "resources") if section.get(name) is not None}


def dra_driver_section(spec: Mapping[str, object]) -> dict[str, object]:
    """The ClusterPolicy `draDriver` section equal to a GPUCluster spec's `draDriver`, enabled.

    GPUCluster `draDriver.gpus.kubeletPlugin.{env,resources}` are the ClusterPolicy's
    `draDriver.{env,resources}`; `computeDomains` has the same shape in both, without
    `kubeletPlugin.healthcheck`.
    """
    dra = _as_mapping(spec.get("draDriver"), "spec.draDriver")
    gpus_plugin = _as_mapping(
        _as_mapping(dra.get("gpus"), "spec.draDriver.gpus").get("kubeletPlugin"),
        "spec.draDriver.gpus.kubeletPlugin",
    )
    domains = _as_mapping(dra.get("computeDomains"), "spec.draDriver.computeDomains")
    section: dict[str, object] = {"enabled": True}
    section.update({name: dra[name] for name in _IMAGE_FIELDS if dra.get(name) is not None})
    section.update(_container(gpus_plugin))
    if domains:
        domain_section: dict[str, object] = {}
        if domains.get("enabled") is not None:
            domain_section["enabled"] = domains["enabled"]
        for part in ("controller", "kubeletPlugin"):
            settings = _container(_as_mapping(domains.get(part), f"spec.draDriver.computeDomains.{part}"))
            if settings:
                domain_section[part] = settings
        section["computeDomains"] = domain_section
    return section


def _not_applied(spec: Mapping[str, object]) -> tuple[str, ...]:
    dra = _as_mapping(spec.get("draDriver"), "spec.draDriver")
    gpus_plugin = _as_mapping(_as_mapping(dra.get("gpus"), "spec.draDriver.gpus").get("kubeletPlugin"), "")
    healthcheck = _as_mapping(gpus_plugin.get("healthcheck"), "spec.draDriver.gpus.kubeletPlugin.healthcheck")
    notes: list[str] = []
    if healthcheck.get("enabled") is False or healthcheck.get("port") not in (None, NVIDIA_HEALTHCHECK_PORT):
        notes.append(
            "spec.draDriver.gpus.kubeletPlugin.healthcheck: the kubelet plugin's health check always runs "
            f"on NVIDIA's default port {NVIDIA_HEALTHCHECK_PORT}"
        )
    domains = _as_mapping(dra.get("computeDomains"), "spec.draDriver.computeDomains")
    domain_plugin = _as_mapping(domains.get("kubeletPlugin"), "spec.draDriver.computeDomains.kubeletPlugin")
    if domain_plugin.get("healthcheck") is not None:
        notes.append(
            "spec.draDriver.computeDomains.kubeletPlugin.healthcheck: the compute-domain kubelet plugin "
            "is rendered without a health check"
        )
    notes.extend(
        f"spec.{name}: the ClusterPolicy's spec.{name} configures it"
        for name in _POLICY_OWNED_SECTIONS
        if spec.get(name)
    )
    return tuple(notes)


def gpu_cluster_dra_driver(spec: Mapping[str, object]) -> GpuClusterMapping:
    """The DRA operand settings a GPUCluster spec asks for, read by the ClusterPolicy's parser.

    Raises GpuClusterError naming the GPUCluster field on a shape the CRD schema refuses.
    """
    section = dra_driver_section(spec)
    try:
        dra_driver = parse_policy({"draDriver": section}).dra_driver
    except PolicyParseError as error:
        # The parser names ClusterPolicy paths; the GPUCluster's own path for env/resources differs.
        field = error.field.replace("spec.draDriver.env", "spec.draDriver.gpus.kubeletPlugin.env").replace(
            "spec.draDriver.resources", "spec.draDriver.gpus.kubeletPlugin.resources"
        )
        raise GpuClusterError(field, str(error).split(": ", 1)[-1]) from error
    return GpuClusterMapping(dra_driver=dra_driver, not_applied=_not_applied(spec))


class GpuClusterState(enum.StrEnum):
    """A GPUCluster's standing, before its operand's readiness is known."""

    ACCEPTED = "accepted"  # owns the DRA operand
    WAITING = "waiting"  # no ClusterPolicy yet: nothing to deploy the DRA driver after
    REFUSED = "refused"  # conflicts; changes nothing


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuClusterVerdict:
    state: GpuClusterState
    reason: str  # a condition reason, CamelCase
    message: str  # names the conflicting field and the fix; "" when accepted


def gpu_cluster_verdict(
    name: str,
    gpu_clusters_oldest_first: tuple[str, ...],
    policy_name: str | None,
    policy_dra_enabled: bool,
) -> GpuClusterVerdict:
    """Whether GPUCluster `name` may own the DRA operand (module docstring: the coexistence rule)."""
    owner = gpu_clusters_oldest_first[0] if gpu_clusters_oldest_first else name
    if owner != name:
        return GpuClusterVerdict(
            state=GpuClusterState.REFUSED,
            reason="AnotherGPUClusterOwnsDRA",
            message=(
                f"GPUCluster {owner!r} already owns the DRA driver; only one GPUCluster applies: "
                f"delete GPUCluster {name!r} or move its spec.draDriver into {owner!r}"
            ),
        )
    if policy_name is None:
        return GpuClusterVerdict(
            state=GpuClusterState.WAITING,
            reason="NoClusterPolicy",
            message=(
                "no ClusterPolicy: ocp-gpu deploys the DRA driver after the driver and toolkit of a "
                "ClusterPolicy; create one with spec.draDriver.enabled false"
            ),
        )
    if policy_dra_enabled:
        return GpuClusterVerdict(
            state=GpuClusterState.REFUSED,
            reason="ClusterPolicyOwnsDRA",
            message=(
                f"ClusterPolicy {policy_name!r} sets spec.draDriver.enabled true, so it owns the DRA driver: "
                f"set ClusterPolicy {policy_name!r} spec.draDriver.enabled to false for GPUCluster {name!r} "
                f"to own it, or delete GPUCluster {name!r}"
            ),
        )
    return GpuClusterVerdict(state=GpuClusterState.ACCEPTED, reason="Accepted", message="")


def with_gpu_cluster(policy: Policy, mapping: GpuClusterMapping) -> Policy:
    """The policy whose DRA operand is the accepted GPUCluster's (the ClusterPolicy's draDriver is off)."""
    return dataclasses.replace(policy, dra_driver=mapping.dra_driver)


# The reason a GPUCluster whose spec the DRA operand cannot use is refused with.
INVALID_REASON = "InvalidGPUCluster"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuClusterDecision:
    """One GPUCluster's standing this pass, and what it asks of the DRA operand when accepted."""

    name: str
    verdict: GpuClusterVerdict
    # None unless accepted.
    mapping: GpuClusterMapping | None = None


def decide_gpu_cluster(
    name: str,
    spec: Mapping[str, object],
    gpu_clusters_oldest_first: tuple[str, ...],
    policy_name: str | None,
    policy: Policy | None,
    env: Mapping[str, str],
) -> GpuClusterDecision:
    """The coexistence rule (`gpu_cluster_verdict`), then the GPUCluster's own spec: one the
    DRA operand cannot use (an image that cannot be resolved, a field of the wrong shape) is
    refused naming the field, and the ClusterPolicy's operands go on as they are."""
    verdict = gpu_cluster_verdict(
        name, gpu_clusters_oldest_first, policy_name, policy is not None and policy.dra_driver.enabled
    )
    if verdict.state is not GpuClusterState.ACCEPTED or policy is None:
        return GpuClusterDecision(name=name, verdict=verdict)
    try:
        mapping = gpu_cluster_dra_driver(spec)
    except GpuClusterError as error:
        # only a spec the server did not check (its CRD replaced by another): say which field
        return GpuClusterDecision(name=name, verdict=_invalid(name, str(error)))
    # NB: only the problems the GPUCluster brings: the ClusterPolicy's own are its status's.
    before = {(p.field, p.message) for p in validate_policy(policy, env)}
    problems = [
        p
        for p in validate_policy(with_gpu_cluster(policy, mapping), env)
        if p.severity is Severity.ERROR and (p.field, p.message) not in before
    ]
    if problems:
        return GpuClusterDecision(
            name=name,
            verdict=_invalid(name, "; ".join(f"{p.field}: {p.message} (fix: {p.fix})" for p in problems)),
        )
    return GpuClusterDecision(name=name, verdict=verdict, mapping=mapping)


def _invalid(name: str, problem: str) -> GpuClusterVerdict:
    return GpuClusterVerdict(
        state=GpuClusterState.REFUSED,
        reason=INVALID_REASON,
        message=f"GPUCluster {name!r} cannot be deployed: {problem}; the DRA driver is left as it is",
    )


def decide_gpu_clusters(
    gpu_clusters: Iterable[custom_resources.GpuClusterObject],
    policy_name: str | None,
    policy: Policy | None,
    env: Mapping[str, str],
) -> tuple[GpuClusterDecision, ...]:
    """Each GPUCluster's standing, the oldest first (the oldest may own the DRA operand)."""
    ordered = sorted(gpu_clusters, key=lambda each: (each.created, each.name))
    oldest_first = tuple(each.name for each in ordered)
    return tuple(
        decide_gpu_cluster(each.name, each.spec, oldest_first, policy_name, policy, env) for each in ordered
    )


def effective_policy(policy: Policy, decisions: Sequence[GpuClusterDecision]) -> Policy:
    """The policy the operands are applied from: the accepted GPUCluster's DRA driver, if any."""
    for decision in decisions:
        if decision.mapping is not None:
            return with_gpu_cluster(policy, decision.mapping)
    return policy
