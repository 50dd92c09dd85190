"""Fuzzing the operator with adversarial ClusterPolicies, generated from the CRD's own schema.

`spec_strategy` turns the CRD's OpenAPI v3 schema (``ocp_gpu/crds/...yaml``, read at run
time, so the fuzzer follows the schema as it grows) into a hypothesis strategy of
policy specs that are mostly schema-valid and as hostile as the schema allows: every
string field gets YAML/JSON/template metacharacters, newlines, unicode, empty and 10 KB
strings (or, where the schema has an enum or a pattern, mostly values that fit it);
numbers their boundaries; lists empty, short or huge; maps hostile keys and values.
`mutation_strategy` yields mutations of a running policy: one section of the spec
replaced, or the whole spec.

`PolicyFuzzer` applies each case to the real apiserver with the operator running and
checks, per case: the operator is alive and reports on the new generation (no hang); when
it calls the input invalid, every DaemonSet of ours (driver, container toolkit) is still
there, unrewritten (same uid and generation); when it takes the input but cannot apply it
(an Error condition), every DaemonSet is still there (same uid); when it accepts it, each
DaemonSet present in the base keeps its structure (selector, containers, owner); its
writes per case stay bounded (no hot loop). Used by tests/e2e/test_fuzz.py (a few dozen cases)
and bench/fuzz_policies.py (as many as asked).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import kubernetes.client
import urllib3
import yaml
from hypothesis import strategies as st
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu.model import apis, labels
from ocp_gpu_harness.chaos import AuditWindow
from ocp_gpu_harness.operating import OperatorProcess

CRD_PATH: Final = Path(__file__).resolve().parents[1] / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"

# Strings that have broken YAML, JSON, templates, shells, label syntax or terminals somewhere.
HOSTILE_STRINGS: Final = (
    "",
    " ",
    "{{ 7*7 }}",
    "{% raw %}",
    "{{ ds.driver.image }}",
    "${HOME}",
    "$(reboot)",
    "`id`",
    "'; DROP TABLE nodes; --",
    '"quoted"',
    "a: b",
    "- item",
    "key: [1, 2]",
    "{a: 1}",
    "---\nkind: Pod",
    "multi\nline\n",
    "tab\there",
    "#comment",
    "&anchor",
    "*alias",
    "!!python/object/apply:os.system ['id']",
    "? complex",
    "|\n  block",
    ">\n  folded",
    "null",
    "~",
    "true",
    "no",
    "0x1F",
    "1e309",
    "-0",
    "NaN",
    ".inf",
    "%",
    "100%",
    "101%",
    "-1",
    "../../etc/passwd",
    "nvidia.com/gpu",
    "a" * 64,
    "A_B",
    "\u202etxt.exe",
    "\u00e9\u00e8\u00ea",
    "\U0001f525",
    "\\",
    "\\n",
    "\x1b[31mred",
    "x" * 10_240,
)

# Keys of user maps (labels, annotations, selectors, env names) worth trying.
HOSTILE_KEYS: Final = (
    "a",
    "app",
    "app.kubernetes.io/managed-by",
    "nvidia.com/gpu.deploy.driver",
    "kubernetes.io/hostname",
    "-bad",
    "a/b/c",
    "UPPER",
    "with space",
    "k" * 64,
    "{{ x }}",
    "ключ",
)

# Any character a JSON body can carry (lone surrogates cannot be encoded as UTF-8).
_TEXT: Final = st.characters(codec="utf-8")
_INT_BOUNDARIES: Final = (0, 1, -1, 2, 10, 100, 2**31 - 1, -(2**31), 2**53, 2**63 - 1)
_MAX_DEPTH: Final = 8


def load_spec_schema(crd_path: Path = CRD_PATH) -> dict[str, Any]:
    """The OpenAPI v3 schema of ``spec`` in the CRD's storage version."""
    crd = yaml.safe_load(crd_path.read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage", True))
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _strings(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    if enum := schema.get("enum"):
        # Mostly a value the schema allows; now and then a hostile one (the apiserver refuses it).
        allowed = st.sampled_from(list(enum))
        return st.one_of(allowed, allowed, allowed, st.sampled_from(HOSTILE_STRINGS))
    hostile = st.sampled_from(HOSTILE_STRINGS)
    free = st.text(_TEXT, max_size=40)
    if pattern := schema.get("pattern"):
        fitting = st.from_regex(pattern, fullmatch=True).filter(lambda s: len(s) < 200)
        return st.one_of(fitting, fitting, fitting, hostile)
    if (limit := schema.get("maxLength")) is not None:
        return st.one_of(
            hostile.filter(lambda s: len(s) <= limit),
            st.text(_TEXT, max_size=int(limit)),
            st.just("y" * int(limit)),
        )
    return st.one_of(hostile, hostile, free)


def _integers(schema: Mapping[str, Any]) -> st.SearchStrategy[int]:
    low = schema.get("minimum")
    high = schema.get("maximum")
    if schema.get("format") == "int32":
        low = -(2**31) if low is None else low
        high = 2**31 - 1 if high is None else high
    bounds = [v for v in _INT_BOUNDARIES if (low is None or v >= low) and (high is None or v <= high)]
    edges = [v for v in (low, high) if v is not None]
    return st.one_of(
        st.sampled_from([*bounds, *edges] or [0]),
        st.integers(
            min_value=None if low is None else int(low), max_value=None if high is None else int(high)
        ),
    )


def _unique_key(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """How items of an x-kubernetes-list-type map/set list are told apart (None: any list)."""
    kind = schema.get("x-kubernetes-list-type")
    if kind == "map":
        keys = list(schema.get("x-kubernetes-list-map-keys") or ())
        return lambda item: tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)
    if kind == "set":
        return lambda item: json.dumps(item, sort_keys=True)
    return None


def _arrays(schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[list[Any]]:
    items = strategy_for(schema.get("items") or {}, depth + 1)
    low = int(schema.get("minItems", 0))
    high = schema.get("maxItems")
    unique = _unique_key(schema)
    if unique is not None and schema.get("x-kubernetes-list-type") == "map":
        # Items of a map list need their keys set; drop the ones that lack them.
        keys = list(schema.get("x-kubernetes-list-map-keys") or ())
        items = items.filter(lambda item: isinstance(item, dict) and all(k in item for k in keys))
    short = st.lists(items, min_size=low, max_size=min(3, high) if high is not None else 3, unique_by=unique)
    # Huge: many copies of small items (hypothesis would shrink forever on 300 distinct ones).
    huge_size = min(300, int(high)) if high is not None else 300
    huge = st.lists(items, min_size=max(low, 1), max_size=1, unique_by=unique).map(
        lambda found: found * huge_size if unique is None else found
    )
    return st.one_of(short, short, huge)


def _maps(schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    values = (
        strategy_for(schema["additionalProperties"], depth + 1)
        if isinstance(schema["additionalProperties"], dict)
        else st.sampled_from(HOSTILE_STRINGS)
    )
    keys = st.one_of(st.sampled_from(HOSTILE_KEYS), st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True))
    return st.one_of(
        st.dictionaries(keys, values, max_size=3),
        st.dictionaries(st.from_regex(r"k[0-9]{1,3}", fullmatch=True), values, min_size=50, max_size=120),
    )


def _objects(schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    if not properties:
        if isinstance(schema.get("additionalProperties"), dict | bool) and schema.get("additionalProperties"):
            return _maps(schema, depth)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return st.dictionaries(
                st.sampled_from(HOSTILE_KEYS), st.sampled_from(HOSTILE_STRINGS), max_size=3
            )
        return st.just({})
    if depth >= _MAX_DEPTH:
        return st.just({})
    required = set(schema.get("required") or ())
    return st.fixed_dictionaries(
        {k: strategy_for(v, depth + 1) for k, v in properties.items() if k in required},
        optional={k: strategy_for(v, depth + 1) for k, v in properties.items() if k not in required},
    )


def strategy_for(schema: Mapping[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for one schema node (see the module docstring)."""
    if schema.get("x-kubernetes-int-or-string") or "anyOf" in schema or "oneOf" in schema:
        alternatives = list(
            schema.get("anyOf") or schema.get("oneOf") or [{"type": "integer"}, {"type": "string"}]
        )
        options = []
        for alternative in alternatives:
            merged = {**{k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}, **alternative}
            merged.pop("x-kubernetes-int-or-string", None)
            if merged.get("type") == "integer":
                merged.pop("pattern", None)
            options.append(strategy_for(merged, depth))
        return st.one_of(options)
    kind = schema.get("type")
    if kind == "string":
        return _strings(schema)
    if kind == "integer":
        return _integers(schema)
    if kind == "number":
        return st.one_of(_integers(schema), st.floats(allow_nan=False, allow_infinity=False, width=32))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return _arrays(schema, depth)
    if kind == "object" or "properties" in schema:
        return _objects(schema, depth)
    # Untyped (x-kubernetes-preserve-unknown-fields alone): small hostile JSON.
    return st.one_of(st.sampled_from(HOSTILE_STRINGS), st.integers(), st.booleans())


def spec_strategy(schema: Mapping[str, Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Whole policy specs."""
    found: st.SearchStrategy[dict[str, Any]] = strategy_for(schema or load_spec_schema())
    return found


@dataclasses.dataclass(frozen=True)
class Mutation:
    """A change to a running policy: ``section`` of the spec replaced by ``value``, or the
    whole spec (``section`` None)."""

    section: str | None
    value: Any

    def apply_to(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        if self.section is None:
            return dict(self.value)
        changed = copy.deepcopy(dict(spec))
        changed[self.section] = self.value
        return changed

    def describe(self, limit: int = 300) -> str:
        text = json.dumps({self.section or "(spec)": self.value}, ensure_ascii=True, default=str)
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def mutation_strategy(schema: Mapping[str, Any] | None = None) -> st.SearchStrategy[Mutation]:
    schema = schema or load_spec_schema()
    sections = [
        st.tuples(st.just(name), strategy_for(sub, 1))
        for name, sub in (schema.get("properties") or {}).items()
    ]
    one_section = st.one_of(sections).map(lambda pair: Mutation(pair[0], pair[1]))
    whole = spec_strategy(schema).map(lambda spec: Mutation(None, spec))
    return st.one_of(one_section, one_section, one_section, whole)


# --- applying cases to a live cluster ------------------------------------------------------------

# A case may legitimately roll a DaemonSet, relabel nodes and write status and Events;
# more writes than this for one case is a hot loop.
MAX_WRITES_PER_CASE: Final = 150
# The apiserver's request body limit (3 MiB): larger cases are counted as refused, not sent.
MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
# Above this, a closed connection (instead of an answer) counts as a refusal too.
LARGE_REQUEST_BYTES: Final = 512 * 1024
# The condition reason of an apply the apiserver refused, and how its message says the
# refusal was about the object (not a connection cut or a conflict).
APPLY_FAILED: Final = "ApplyFailed"
REFUSED_APPLY: Final = re.compile(r"HTTP (400|422)\b")
# How long the operator may take to report on a new generation.
REPORT_TIMEOUT_S: Final = 30.0


@dataclasses.dataclass
class FuzzStats:
    cases: int = 0
    rejected_by_apiserver: int = 0
    reported_invalid: int = 0
    accepted: int = 0
    # Error condition reasons on accepted, valid-looking input (e.g. an apply the apiserver refused).
    error_reasons: Counter[str] = dataclasses.field(default_factory=Counter)
    # A few of the inputs behind each such reason: validation gaps to report.
    error_examples: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    rejection_reasons: Counter[str] = dataclasses.field(default_factory=Counter)
    max_writes_per_case: int = 0
    writes: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        found = dataclasses.asdict(self)
        found["error_reasons"] = dict(self.error_reasons)
        found["rejection_reasons"] = dict(self.rejection_reasons.most_common(10))
        return found


def _our_daemonsets(api: ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    """Every DaemonSet of ours (driver, container toolkit, ...), by name."""
    items = json.loads(
        kubernetes.client.AppsV1Api(api)
        .list_namespaced_daemon_set(
            namespace, label_selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}", _preload_content=False
        )
        .data
    )["items"]
    return {d["metadata"]["name"]: d for d in items if not d["metadata"].get("deletionTimestamp")}


def _has_driver(daemonsets: Mapping[str, Any]) -> bool:
    return any(name.startswith(labels.DRIVER_APP) for name in daemonsets)


def _shape(daemonset: Mapping[str, Any]) -> dict[str, Any]:
    """What a DaemonSet's structure is, whatever values the policy put in it.

    NB: volumes and init containers are not in it: valid settings (certConfig,
    repoConfig, licensingConfig...) add some."""
    pod = daemonset["spec"]["template"]["spec"]
    return {
        "selector": daemonset["spec"]["selector"],
        "containers": [c["name"] for c in pod.get("containers") or ()],
        "owner_kinds": sorted(r["kind"] for r in daemonset["metadata"].get("ownerReferences") or ()),
    }


def _error_conditions(policy: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(c.get("reason")), str(c.get("message")))
        for c in (policy.get("status") or {}).get("conditions") or ()
        if c.get("type") == "Error" and c.get("status") == "True"
    ]


def _error_reasons(policy: Mapping[str, Any]) -> list[str]:
    return [
        str(c.get("reason"))
        for c in (policy.get("status") or {}).get("conditions") or ()
        if c.get("type") == "Error" and c.get("status") == "True"
    ]


class PolicyFuzzer:
    """Applies mutations to the running policy ``name`` and checks each (module docstring)."""

    INVALID_REASON: Final = "InvalidSpec"

    def __init__(
        self,
        api: ApiClient,
        operator: OperatorProcess | Callable[[], OperatorProcess | None],
        namespace: str,
        base_spec: Mapping[str, Any],
        audit_log: Path,
        operator_user: str,
        name: str = labels.CLUSTER_POLICY_NAME,
    ) -> None:
        self.api = api
        self._operator = operator
        self.namespace = namespace
        self.base_spec = copy.deepcopy(dict(base_spec))
        self.audit_log = audit_log
        self.operator_user = operator_user
        self.name = name
        self.stats = FuzzStats()
        self._custom = kubernetes.client.CustomObjectsApi(api)
        self._base_shapes: dict[str, dict[str, Any]] = {}

    @property
    def operator(self) -> OperatorProcess | None:
        return self._operator if isinstance(self._operator, OperatorProcess) else self._operator()

    def _read(self) -> dict[str, Any]:
        found: dict[str, Any] = self._custom.get_cluster_custom_object(
            apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, self.name
        )
        return found

    def _replace_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        current = self._read()
        body = {
            "apiVersion": apis.POLICY_API_VERSION,
            "kind": apis.POLICY_KIND,
            "metadata": {"name": self.name, "resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": spec,
        }
        replaced: dict[str, Any] = self._custom.replace_cluster_custom_object(
            apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, self.name, body
        )
        return replaced

    def _wait_reported(self, generation: int) -> dict[str, Any] | None:
        deadline = time.monotonic() + REPORT_TIMEOUT_S
        while time.monotonic() < deadline:
            policy = self._read()
            if int((policy.get("status") or {}).get("observedGeneration") or 0) >= generation:
                return policy
            if (op := self.operator) is not None and not op.running():
                return None
            time.sleep(0.1)
        return None

    def restore_base(self) -> None:
        """The base spec back, and its DaemonSets present (their shapes recorded the first time)."""
        replaced = self._replace_spec(self.base_spec)
        self._wait_reported(int(replaced["metadata"]["generation"]))
        deadline = time.monotonic() + REPORT_TIMEOUT_S
        while not self._complete(found := _our_daemonsets(self.api, self.namespace)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"DaemonSets of the base spec not all there: {sorted(found)}")
            time.sleep(0.2)
        if not self._base_shapes:
            self._base_shapes = {n: _shape(d) for n, d in found.items()}

    def _complete(self, daemonsets: Mapping[str, Any]) -> bool:
        """The base spec's DaemonSets are all there (the first time: a driver DaemonSet and
        whatever else has appeared a moment later)."""
        if self._base_shapes:
            return set(self._base_shapes) <= set(daemonsets)
        if _has_driver(daemonsets):
            time.sleep(2.0)
            return True
        return False

    def _fail(self, mutation: Mutation, what: str) -> None:
        self.stats.failures.append(f"{what} | {mutation.describe()}")

    def run_case(self, mutation: Mutation) -> list[str]:
        """Apply one mutation and check it; the failures it found (also kept in ``stats``)."""
        began = time.monotonic()
        failures_before = len(self.stats.failures)
        self.stats.cases += 1
        before = _our_daemonsets(self.api, self.namespace)
        if not self._complete(before):
            # A previous (valid) case turned an operand off: start from the base again.
            self.restore_base()
            before = _our_daemonsets(self.api, self.namespace)
        audit = AuditWindow(self.audit_log).start()
        spec = mutation.apply_to(self.base_spec)
        size = len(json.dumps(spec))
        if size > MAX_REQUEST_BYTES:
            # The apiserver refuses such a body (it may just close the connection): not sent.
            self.stats.rejected_by_apiserver += 1
            self.stats.rejection_reasons["too large (not sent)"] += 1
            return []
        try:
            replaced = self._replace_spec(spec)
        except urllib3.exceptions.HTTPError:
            if size < LARGE_REQUEST_BYTES:
                raise
            # A large body the apiserver cut off (seen: SSL EOF) rather than answered.
            self.stats.rejected_by_apiserver += 1
            self.stats.rejection_reasons["large body, connection closed"] += 1
            return []
        except ApiException as error:
            if error.status == 500 and "too large" in (error.body or ""):
                error.status = 413  # etcd's object size limit, reported as a server error
            if error.status in (400, 413, 422):
                self.stats.rejected_by_apiserver += 1
                reason = json.loads(error.body or "{}").get("reason", str(error.status)) if error.body else ""
                self.stats.rejection_reasons[str(reason)] += 1
                return []
            raise
        policy = self._wait_reported(int(replaced["metadata"]["generation"]))
        op = self.operator
        if op is not None and not op.running():
            self._fail(mutation, f"operator exited (code {op.stop()})")
        elif policy is None:
            self._fail(
                mutation,
                f"no status for generation {replaced['metadata']['generation']} in {REPORT_TIMEOUT_S:.0f} s",
            )
        else:
            self._check(mutation, policy, before)
        # Whatever the operator does about this case, it does within a second or two.
        time.sleep(0.5)
        writes = sum(audit.writes(self.operator_user).values())
        self.stats.writes += writes
        self.stats.max_writes_per_case = max(self.stats.max_writes_per_case, writes)
        if writes > MAX_WRITES_PER_CASE:
            self._fail(mutation, f"{writes} writes for one case (hot loop?)")
        self.stats.seconds += time.monotonic() - began
        return self.stats.failures[failures_before:]

    def _check(
        self, mutation: Mutation, policy: Mapping[str, Any], before: Mapping[str, dict[str, Any]]
    ) -> None:
        reasons = _error_reasons(policy)
        after = _our_daemonsets(self.api, self.namespace)
        if self.INVALID_REASON in reasons:
            self.stats.reported_invalid += 1
            # Bad input: every DaemonSet stays, unrewritten.
            for name, daemonset in before.items():
                now = after.get(name)
                if now is None:
                    self._fail(mutation, f"invalid input deleted DaemonSet {name}")
                elif (
                    now["metadata"]["uid"] != daemonset["metadata"]["uid"]
                    or now["metadata"]["generation"] != daemonset["metadata"]["generation"]
                ):
                    self._fail(mutation, f"invalid input rewrote DaemonSet {name}")
            return
        self.stats.accepted += 1
        for reason, message in _error_conditions(policy):
            self.stats.error_reasons[reason] += 1
            examples = self.stats.error_examples.setdefault(reason, [])
            if len(examples) < 5:
                examples.append(f"{mutation.describe()} -> {message[:300]}")
        for reason, message in _error_conditions(policy):
            if reason == APPLY_FAILED and REFUSED_APPLY.search(message):
                # The invariant that found bug C: input the operator accepts, the apiserver
                # accepts when applied (a value it refuses must be InvalidSpec, named).
                self._fail(mutation, f"accepted, then refused by the apiserver on apply: {message[:300]}")
        if reasons:
            # Input the operator took but could not apply: what was running must still run.
            for name, daemonset in before.items():
                now = after.get(name)
                if now is None or now["metadata"]["uid"] != daemonset["metadata"]["uid"]:
                    self._fail(mutation, f"DaemonSet {name} deleted after {reasons}")
        for name, daemonset in after.items():
            base = self._base_shapes.get(name)
            shape = _shape(daemonset)
            if base is not None and shape != base:
                self._fail(mutation, f"DaemonSet {name} changed structure: {base} -> {shape}")
