"""Values of a ClusterPolicy that end up in the objects we apply, checked as the API server would.

The CRD's schema cannot say everything the API server's validation of a pod says: a
resource named `a`, an env var named `A=B`, a label key with two `/`, a toleration with
a value but operator `Exists`, a liveness probe with successThreshold 2.  A policy
holding one of those used to be accepted, rendered, and then refused by the API server
when the DaemonSet was applied (bug C of issue 8, found by bench/fuzz_policies.py): the
admin got `ApplyFailed` with a raw apiserver message.  Each rule here mirrors one the
API server applies (reproduced on the local control plane, see
tests/e2e/test_fuzz.py), so the policy gets `InvalidSpec` naming the field, the value
and the fix instead, before anything is applied.

NB: a rule here must never refuse a value the API server accepts (that would break a
working policy): where unsure, leave it to the apply.  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Final

from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity

# --- the API server's syntax rules (k8s.io/apimachinery/pkg/util/validation) -----------

_DNS1123_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE: Final = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
# The name part of a qualified name (label keys, annotation keys, extended resources).
_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SYSCTL_RE: Final = re.compile(r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?")
_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Total size of a pod's annotations (keys and values).
ANNOTATIONS_MAX_BYTES: Final = 256 * 1024
# Pod security context ids: the API server's range.
ID_MAX: Final = 2**31 - 1
# Resources a container may name without a domain prefix (the API server's "standard
# resources for containers"); hugepages-<size> too.
CONTAINER_RESOURCES: Final = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX: Final = "hugepages-"
TOLERATION_OPERATORS: Final = ("Exists", "Equal")
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Shown values are cut to this many characters: a 10 KB value must not flood status.
SHOWN_MAX: Final = 40


_CHARACTERS: Final = (
    "its name part has characters other than letters, digits, '-', '_', '.', "
    "or does not start and end with a letter or digit"
)


def shown(value: object) -> str:
    """The value as the message shows it, cut to SHOWN_MAX characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 5] + "...'" + f" ({len(str(value))} chars)"


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and _DNS1123_SUBDOMAIN_RE.fullmatch(value) is not None


def qualified_name_error(value: str) -> str | None:
    """Why ``value`` is not a qualified name (`[prefix/]name`), or None."""
    prefix, slash, name = value.rpartition("/")
    if slash and "/" in prefix:
        return "has more than one '/'"
    if slash and not is_dns1123_subdomain(prefix):
        return "its prefix is not a lowercase DNS subdomain"
    if not name:
        return "its name part is empty"
    if len(name) > 63:
        return "its name part is longer than 63 characters"
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        return _CHARACTERS
    return None


def label_value_error(value: str) -> str | None:
    if len(value) > 63:
        return "is longer than 63 characters"
    if value and _QUALIFIED_NAME_RE.fullmatch(value) is None:
        return _CHARACTERS.replace("its name part ", "")
    return None


def env_name_error(name: str) -> str | None:
    if not name:
        return "is empty"
    if any(not " " <= char <= "~" or char == "=" for char in name):
        return "has a character that is not printable ASCII, or '='"
    return None


def parse_quantity(text: str) -> Fraction | None:
    """A Kubernetes quantity ("500m", "1Gi", "2e3") as an exact number; None if it is not one."""
    match = _QUANTITY_RE.fullmatch(text.strip())
    if match is None:
        return None
    number = Fraction(match["number"])
    if match["sign"] == "-":
        number = -number
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > 30:
        # The API server caps a quantity's scale; such a value is astronomically off anyway.
        return number * Fraction(10) ** max(-30, min(30, exponent))
    return number * Fraction(10) ** exponent


def _problem(field: str, message: str, fix: str, severity: Severity = Severity.ERROR) -> PolicyProblem:
    return PolicyProblem(field=field, message=message, fix=fix, severity=severity)


# --- resources ---------------------------------------------------------------------------


def _is_extended(name: str) -> bool:
    # The API server's IsExtendedResourceName: prefixed, not kubernetes.io's, not a quota name.
    prefix = name.partition("/")[0] if "/" in name else ""
    return bool(prefix) and not prefix.endswith("kubernetes.io") and not name.startswith("requests.")


def _resources(field: str, resources: policy_spec.ResourceRequirements) -> Iterator[PolicyProblem]:
    parsed: dict[str, dict[str, Fraction]] = {}
    for kind, values in (("limits", resources.limits), ("requests", resources.requests)):
        parsed[kind] = {}
        for name, text in values.items():
            where = f"{field}.{kind}[{name}]"
            if "/" not in name and name not in CONTAINER_RESOURCES and not name.startswith(HUGEPAGES_PREFIX):
                # The API server: "must be a standard resource for containers".
                yield _problem(
                    where,
                    f"{shown(name)} is not a resource a container can ask for",
                    "use cpu, memory, ephemeral-storage, hugepages-<size>, or a resource with a "
                    "domain such as nvidia.com/gpu",
                )
                continue
            if "/" in name and (error := qualified_name_error(name)) is not None:
                yield _problem(
                    where, f"{shown(name)} is not a resource name: {error}", "use e.g. example.com/foo"
                )
                continue
            amount = parse_quantity(str(text))
            if amount is None:
                yield _problem(where, f"{shown(text)} is not a quantity", "use e.g. 500m, 1Gi or 2")
                continue
            if amount < 0:
                yield _problem(where, f"{shown(text)} is negative", "use 0 or more")
                continue
            if _is_extended(name) and amount.denominator != 1:
                yield _problem(where, f"{shown(text)}: {name} is counted in whole units", "use an integer")
                continue
            parsed[kind][name] = amount
    limits, requests = parsed["limits"], parsed["requests"]
    for name, requested in requests.items():
        where = f"{field}.requests[{name}]"
        limit = limits.get(name)
        if (_is_extended(name) or name.startswith(HUGEPAGES_PREFIX)) and limit is None:
            # Extended resources and huge pages cannot be overcommitted.
            yield _problem(
                where,
                f"{name} is requested without a limit",
                f"set {field}.limits[{name}] to the same amount",
            )
        elif (_is_extended(name) or name.startswith(HUGEPAGES_PREFIX)) and limit != requested:
            yield _problem(
                where,
                f"{name}: the request differs from the limit",
                f"set {field}.requests[{name}] equal to {field}.limits[{name}] (or leave the request out)",
            )
        elif limit is not None and requested > limit:
            yield _problem(
                where,
                f"{name}: the request {shown(resources.requests[name])} is above the limit "
                f"{shown(resources.limits[name])}",
                f"raise {field}.limits[{name}] or lower the request",
            )
    if any(name.startswith(HUGEPAGES_PREFIX) for name in (*limits, *requests)) and not any(
        name in ("cpu", "memory") for name in (*limits, *requests)
    ):
        yield _problem(
            field,
            "huge pages are asked for without cpu or memory",
            f"set {field}.limits.memory or .cpu as well",
        )


# --- env, labels, annotations ------------------------------------------------------------------


def env_lists(policy: policy_spec.Policy) -> Iterator[tuple[str, Sequence[policy_spec.EnvVar]]]:
    """Every env list of the policy, by its field."""
    for key, component in policy.components().items():
        yield f"spec.{key}.env", component.env
    yield "spec.driver.manager.env", policy.driver.manager.env
    for key in ("plugin", "toolkit", "driver", "cuda"):
        yield f"spec.validator.{key}.env", getattr(policy.validator, f"{key}_env")


def _env_names(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    for field, env in env_lists(policy):
        for index, variable in enumerate(env):
            if (error := env_name_error(variable.name)) is not None:
                yield _problem(
                    f"{field}[{index}].name",
                    f"the environment variable name {shown(variable.name)} {error}",
                    "use printable ASCII without '=', e.g. MY_OPTION",
                )


def _labels(field: str, values: Mapping[str, str]) -> Iterator[PolicyProblem]:
    for key, value in values.items():
        if (error := qualified_name_error(key)) is not None:
            yield _problem(
                f"{field}[{key}]",
                f"{shown(key)} is not a label key: {error}",
                "use [prefix/]name, e.g. example.com/team, name at most 63 characters",
            )
        elif (error := label_value_error(value)) is not None:
            yield _problem(
                f"{field}[{key}]",
                f"the label value {shown(value)} {error}",
                "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            )


def _annotations(field: str, values: Mapping[str, str]) -> Iterator[PolicyProblem]:
    for key in values:
        if (error := qualified_name_error(key)) is not None:
            yield _problem(
                f"{field}[{key}]",
                f"{shown(key)} is not an annotation key: {error}",
                "use [prefix/]name, e.g. example.com/note, name at most 63 characters",
            )
    size = sum(len(key.encode()) + len(value.encode()) for key, value in values.items())
    if size > ANNOTATIONS_MAX_BYTES:
        yield _problem(
            field,
            f"the annotations take {size} bytes, above the API server's {ANNOTATIONS_MAX_BYTES}",
            "shorten them (a ConfigMap can hold large data)",
        )


def _metadata(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    yield from _labels("spec.daemonsets.labels", policy.daemonsets.labels)
    yield from _annotations("spec.daemonsets.annotations", policy.daemonsets.annotations)
    for field, monitor in (
        ("spec.dcgmExporter.serviceMonitor.additionalLabels", policy.dcgm_exporter.service_monitor),
        ("spec.operator.metrics.serviceMonitor.additionalLabels", policy.operator.metrics_service_monitor),
    ):
        yield from _labels(field, monitor.additional_labels)


# --- pod fields ---------------------------------------------------------------------------


def _tolerations(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    for index, toleration in enumerate(policy.daemonsets.tolerations):
        field = f"spec.daemonsets.tolerations[{index}]"
        operator = toleration.operator or "Equal"
        if toleration.key and (error := qualified_name_error(toleration.key)) is not None:
            yield _problem(
                f"{field}.key", f"{shown(toleration.key)} is not a taint key: {error}", "use a taint's key"
            )
        if operator not in TOLERATION_OPERATORS:
            yield _problem(
                f"{field}.operator", f"{shown(operator)} is not an operator", "use Exists or Equal"
            )
        elif not toleration.key and operator != "Exists":
            yield _problem(
                f"{field}.operator",
                "a toleration without a key must use operator Exists (it then tolerates every taint)",
                "set operator: Exists, or set a key",
            )
        elif operator == "Exists" and toleration.value:
            yield _problem(
                f"{field}.value",
                f"{shown(toleration.value)}: a value with operator Exists",
                "remove the value, or use operator Equal",
            )
        elif (error := label_value_error(toleration.value)) is not None:
            yield _problem(
                f"{field}.value", f"the value {shown(toleration.value)} {error}", "use the taint's value"
            )
        if toleration.effect and toleration.effect not in TAINT_EFFECTS:
            yield _problem(
                f"{field}.effect",
                f"{shown(toleration.effect)} is not a taint effect",
                f"use one of {', '.join(TAINT_EFFECTS)}, or leave it empty for every effect",
            )
        elif toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
            yield _problem(
                f"{field}.tolerationSeconds",
                "tolerationSeconds applies only to effect NoExecute",
                "set effect: NoExecute, or remove tolerationSeconds",
            )


def _object_names(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    for field, value, what in (
        ("spec.daemonsets.priorityClassName", policy.daemonsets.priority_class_name, "PriorityClass"),
        ("spec.operator.runtimeClass", policy.operator.runtime_class, "RuntimeClass"),
        ("spec.driver.secretEnv", policy.driver.secret_env, "Secret"),
    ):
        if value and not is_dns1123_subdomain(value):
            yield _problem(
                field,
                f"{shown(value)} cannot be the name of a {what}",
                "use a lowercase DNS subdomain: a-z, 0-9, '-' and '.', at most 253 characters",
            )


def _pull_secrets(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    specs = {f"spec.{key}": component.image for key, component in policy.components().items()}
    specs["spec.driver.manager"] = policy.driver.manager.image
    for field, image in specs.items():
        for index, name in enumerate(image.pull_secrets):
            if not is_dns1123_subdomain(name):
                # NB: the API server accepts it (the kubelet then pulls without it): a warning.
                yield _problem(
                    f"{field}.imagePullSecrets[{index}]",
                    f"{shown(name)} cannot name a Secret, so the image is pulled without it",
                    "use the name of a Secret in the operator namespace (a lowercase DNS subdomain)",
                    Severity.WARNING,
                )


def _host_paths(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    for field, path in (
        ("spec.hostPaths.rootFS", policy.host_paths.root_fs),
        ("spec.toolkit.installDir", policy.toolkit.install_dir),
        ("spec.hostPaths.kubeletRootDir", policy.host_paths.kubelet_root_dir),
        ("spec.hostPaths.driverInstallDir", policy.host_paths.driver_install_dir),
    ):
        if not path:
            yield _problem(field, "is empty", "use an absolute path on the host, e.g. /")
        elif ".." in path.split("/"):
            yield _problem(
                field, f"{shown(path)} contains '..'", "use the path without '..' (the API server refuses it)"
            )
    install_dir = policy.host_paths.driver_install_dir
    if policy.driver.enabled and install_dir != policy_spec.DRIVER_ROOT_CONTAINERIZED:
        # NB: NVIDIA renders it (its operands then look for the driver where its driver
        # container never installs it, and its validation waits forever): refused here instead.
        yield _problem(
            "spec.hostPaths.driverInstallDir",
            f"{shown(install_dir)} is where the operands would look for the driver, but with"
            f" driver.enabled the operator's driver DaemonSets install it into"
            f" {policy_spec.DRIVER_ROOT_CONTAINERIZED}",
            "remove hostPaths.driverInstallDir, or set driver.enabled: false when the driver is"
            " installed there by other means",
        )


def _probes(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    for name, probe in (
        ("startupProbe", policy.driver.startup_probe),
        ("livenessProbe", policy.driver.liveness_probe),
        ("readinessProbe", policy.driver.readiness_probe),
    ):
        if probe is None:
            continue
        field = f"spec.driver.{name}"
        for key, value in (
            ("initialDelaySeconds", probe.initial_delay_seconds),
            ("timeoutSeconds", probe.timeout_seconds),
            ("periodSeconds", probe.period_seconds),
            ("successThreshold", probe.success_threshold),
            ("failureThreshold", probe.failure_threshold),
        ):
            if value is not None and not 0 <= value <= ID_MAX:
                yield _problem(f"{field}.{key}", f"{value} is out of range", f"use 0 to {ID_MAX}")
        # NB: successThreshold other than 1 on a startup or liveness probe: policy_checks says so.


def _security_context(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    context = policy.daemonsets.pod_security_context
    field = "spec.daemonsets.podSecurityContext"
    for key in ("runAsUser", "runAsGroup", "fsGroup"):
        value = context.get(key)
        if isinstance(value, int) and not 0 <= value <= ID_MAX:
            yield _problem(f"{field}.{key}", f"{value} is not a user or group id", f"use 0 to {ID_MAX}")
    groups = context.get("supplementalGroups")
    if isinstance(groups, list):
        for index, group in enumerate(groups):
            if isinstance(group, int) and not 0 <= group <= ID_MAX:
                yield _problem(
                    f"{field}.supplementalGroups[{index}]",
                    f"{group} is not a group id",
                    f"use 0 to {ID_MAX}",
                )
                break  # one is enough to say what to fix
    sysctls = context.get("sysctls")
    if isinstance(sysctls, list):
        seen: set[str] = set()
        for index, sysctl in enumerate(sysctls):
            name = str(sysctl.get("name", "")) if isinstance(sysctl, Mapping) else ""
            if len(name) > 253 or _SYSCTL_RE.fullmatch(name) is None:
                yield _problem(
                    f"{field}.sysctls[{index}].name",
                    f"{shown(name)} is not a sysctl name",
                    "use e.g. kernel.shm_rmid_forced",
                )
            elif name in seen:
                yield _problem(
                    f"{field}.sysctls[{index}].name", f"{shown(name)} is listed twice", "keep one entry"
                )
            seen.add(name)


# --- sysctls against the host namespaces a pod shares -----------------------------------

# The kernel namespaces a sysctl can belong to, as the API server tells them apart
# (k8s.io/component-helpers/node/util/sysctl): these names and prefixes; any other is unknown.
NET: Final = "network"
IPC: Final = "IPC"
_IPC_SYSCTLS: Final = frozenset(
    {
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.shm",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.msg",
    }
)
_SYSCTL_PREFIXES: Final = (("net.", NET), ("fs.mqueue.", IPC))
# The pod field that shares each namespace with the host.
HOST_FIELD: Final = {NET: "hostNetwork", IPC: "hostIPC"}


def sysctl_namespace(name: str) -> str | None:
    """The kernel namespace (NET or IPC) a sysctl belongs to, None when it is neither.

    NB: `net/ipv4/ip_forward` is the same sysctl as `net.ipv4.ip_forward`: a name whose first
    separator is `/` has `.` and `/` swapped first, as the API server does.
    """
    first = next((char for char in name if char in "./"), ".")
    if first == "/":
        name = name.translate(str.maketrans("./", "/."))
    name = name.split("*", 1)[0]
    if name in _IPC_SYSCTLS:
        return IPC
    return next((space for prefix, space in _SYSCTL_PREFIXES if name.startswith(prefix)), None)


def host_sysctl_problem(
    policy: policy_spec.Policy, daemonset: str, shared: Mapping[str, str | None]
) -> PolicyProblem | None:
    """A `daemonsets.podSecurityContext` sysctl of a namespace the operand's pods share with
    the host: the API server refuses such a pod (422, "may not be specified when 'hostNetwork'
    is true"), so say which fields meet before anything is applied.

    `shared`: the host namespaces (NET, IPC) the operand's pods share, each with the
    ClusterPolicy field that turns it on, or None when the operand always shares it.
    """
    sysctls = policy.daemonsets.pod_security_context.get("sysctls")
    if not isinstance(sysctls, list):
        return None
    # (index, name) of each sysctl that clashes, per shared namespace, in spec order
    clashes: dict[str, list[tuple[int, str]]] = {}
    for index, sysctl in enumerate(sysctls):
        name = str(sysctl.get("name", "")) if isinstance(sysctl, Mapping) else ""
        space = sysctl_namespace(name)
        if space is not None and space in shared:
            clashes.setdefault(space, []).append((index, name))
    if not clashes:
        return None
    space, found = next(iter(clashes.items()))
    names = ", ".join(shown(name) for _, name in found)
    many = len(found) > 1
    switch = shared[space]
    why = f"{switch} is true" if switch else f"{daemonset} always runs with {HOST_FIELD[space]}: true"
    fix = "remove it from spec.daemonsets.podSecurityContext.sysctls (they apply to every operand)"
    return _problem(
        f"spec.daemonsets.podSecurityContext.sysctls[{found[0][0]}].name",
        f"{names} {'are' if many else 'is a'} {space}-namespaced sysctl{'s' if many else ''}, "
        f"which Kubernetes refuses in a pod sharing the host's {space} namespace, and {why}: "
        f"{daemonset} is not applied",
        f"{fix}, or set {switch}: false" if switch else fix,
    )


def _rolling_update(policy: policy_spec.Policy) -> Iterator[PolicyProblem]:
    value = policy.daemonsets.max_unavailable
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit() and int(value[:-1]) > 100:
        yield _problem(
            "spec.daemonsets.rollingUpdate.maxUnavailable",
            f"{shown(value)} is above 100%",
            'use a percentage up to "100%", or a count',
        )


def problems(policy: policy_spec.Policy) -> list[PolicyProblem]:
    """Every value of ``policy`` the API server would refuse in the objects we render, in spec order."""
    found: list[PolicyProblem] = []
    for key, component in policy.components().items():
        found.extend(_resources(f"spec.{key}.resources", component.resources))
    found.extend(_env_names(policy))
    found.extend(_metadata(policy))
    found.extend(_tolerations(policy))
    found.extend(_object_names(policy))
    found.extend(_pull_secrets(policy))
    found.extend(_host_paths(policy))
    found.extend(_probes(policy))
    found.extend(_security_context(policy))
    found.extend(_rolling_update(policy))
    return found
