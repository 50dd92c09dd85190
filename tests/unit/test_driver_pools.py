"""We test these aspects of per-pool drivers (planning/drivers/driver_pools.py, model/nvidia_driver_spec.py):

- every GPU node gets at most one NVIDIADriver, recorded in the owner label, written only when
  it changes; non-GPU nodes lose a stale one;
- overlapping selectors: the node stays with the pool that runs there, else the oldest pool takes
  it; the conflict names both NVIDIADrivers and the nodes, for both of them;
- an NVIDIADriver with an invalid spec keeps the nodes it has and takes none (nothing moves);
- the default NVIDIADriver takes what no other selects; a second default takes nothing;
- a pool's DaemonSets: stable, valid, distinct names (`nvidia-<type>-driver-<pool>-<key>`),
  selectors that never overlap another pool's, the owner label in the node selector;
- property: whatever the selectors, no node has two owners, and a node's existing owner that
  still selects it is never replaced;
- a pool's DaemonSet whose key none of the pool's nodes carries any more is stale at once,
  whatever the DaemonSet controller still counts;
- the ClusterPolicy's own DaemonSets are deleted only once every node they serve has a pool;
- the NVIDIADriver spec laid over the ClusterPolicy's; its problems under its own field paths.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.desired import pool_manifests
from ocp_gpu.model import driver_snapshot, images, labels, nvidia_driver_spec, releases
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.planning.drivers import driver_plan, driver_pools, driver_strategy

GPU = {labels.NFD_NVIDIA_PCI: "true", labels.GPU_PRESENT: "true"}
OWNER = labels.NVIDIA_DRIVER_OWNER


def node(pool: str | None = None, owner: str | None = None, **extra: str) -> dict[str, str]:
    found = {**GPU, **extra}
    if pool is not None:
        found["pool"] = pool
    if owner is not None:
        found[OWNER] = owner
    return found


def pool(
    name: str, created: str, selector: Mapping[str, str] | None = None, **kwargs: bool
) -> driver_pools.Pool:
    return driver_pools.Pool(name, created, dict(selector or {labels.GPU_PRESENT: "true"}), **kwargs)


A = pool("a", "2026-01-01T00:00:00Z", {"pool": "a"})
B = pool("b", "2026-01-02T00:00:00Z", {"pool": "b"})
# selects every node of pool a and pool b, and is newer than both
WIDE = pool("wide", "2026-01-03T00:00:00Z", {labels.GPU_PRESENT: "true"})


def nodes(**by_name: dict[str, str]) -> dict[NodeName, dict[str, str]]:
    return {NodeName(name): value for name, value in by_name.items()}


def test_each_pool_takes_the_nodes_it_selects_and_the_label_records_it() -> None:
    plan = driver_pools.plan_pool_owners(nodes(n1=node("a"), n2=node("b"), n3=node("c")), [A, B])
    assert plan.owners == {"n1": "a", "n2": "b"}
    assert plan.label_changes == {"n1": "a", "n2": "b"}
    assert plan.unowned == ("n3",)
    assert plan.conflicts == ()


def test_labels_are_written_only_when_they_change() -> None:
    plan = driver_pools.plan_pool_owners(nodes(n1=node("a", owner="a"), n2=node("b", owner="a")), [A, B])
    assert plan.label_changes == {"n2": "b"}


def test_a_node_that_is_no_gpu_node_any_more_loses_its_owner() -> None:
    plan = driver_pools.plan_pool_owners(nodes(n1={"pool": "a", OWNER: "a"}), [A])
    assert plan.owners == {} and plan.label_changes == {"n1": None}


def test_a_node_whose_pool_is_gone_is_relabelled_or_unlabelled() -> None:
    plan = driver_pools.plan_pool_owners(
        nodes(n1=node("a", owner="deleted"), n2=node("z", owner="deleted")), [A]
    )
    assert plan.label_changes == {"n1": "a", "n2": None}


def test_an_overlap_leaves_running_nodes_where_they_are_and_names_both() -> None:
    # n1 runs pool a's driver; n2 is new: the oldest pool (a) takes it; wide gets neither
    plan = driver_pools.plan_pool_owners(nodes(n1=node("a", owner="a"), n2=node("a")), [WIDE, A])
    assert plan.owners == {"n1": "a", "n2": "a"}
    (conflict,) = plan.conflicts
    assert (conflict.owner, conflict.loser, conflict.nodes) == ("a", "wide", ("n1", "n2"))
    assert plan.conflicts_of("wide") == plan.conflicts_of("a") == (conflict,)
    message = conflict.message_for("wide")
    assert (
        "NVIDIADrivers a and wide both select n1, n2" in message
        and "make the nodeSelectors disjoint" in message
    )


def test_the_running_pool_keeps_a_node_even_when_it_is_the_newer_one() -> None:
    plan = driver_pools.plan_pool_owners(nodes(n1=node("a", owner="wide")), [WIDE, A])
    assert plan.owners == {"n1": "wide"} and plan.label_changes == {}
    (conflict,) = plan.conflicts
    assert (conflict.owner, conflict.loser) == ("wide", "a")


def test_the_conflict_message_quotes_at_most_ten_nodes() -> None:
    many = nodes(**{f"n{i:02}": node("a") for i in range(25)})
    (conflict,) = driver_pools.plan_pool_owners(many, [A, WIDE]).conflicts
    assert len(conflict.nodes) == 25
    assert conflict.message_for("a").count("n") < 60 and "(+15 more)" in conflict.message_for("a")


def test_an_invalid_pool_keeps_its_nodes_and_takes_no_new_one() -> None:
    broken = pool("a", A.created, {"pool": "a"}, valid=False)
    plan = driver_pools.plan_pool_owners(nodes(n1=node("a", owner="a"), n2=node("a")), [broken, WIDE])
    # n1 keeps its running driver; n2 goes to the only valid pool that selects it
    assert plan.owners == {"n1": "a", "n2": "wide"}
    assert plan.label_changes == {"n2": "wide"}


def test_the_default_pool_takes_what_no_other_selects_and_only_one_default_counts() -> None:
    first = pool("fallback", "2026-01-05T00:00:00Z", default=True)
    second = pool("fallback2", "2026-01-06T00:00:00Z", default=True)
    plan = driver_pools.plan_pool_owners(nodes(n1=node("a"), n2=node("x")), [second, first, A])
    assert plan.owners == {"n1": "a", "n2": "fallback"}
    assert plan.extra_defaults == ("fallback2",)
    assert plan.conflicts == ()


def test_an_opted_out_node_without_a_pool_is_not_reported_unowned() -> None:
    opted_out = node("x", **{labels.deploy_label("driver"): "false"})
    assert driver_pools.plan_pool_owners(nodes(n1=opted_out), [A]).unowned == ()


selectors = st.dictionaries(st.sampled_from(["pool", "zone"]), st.sampled_from(["a", "b"]), max_size=2)
node_labels = st.dictionaries(st.sampled_from(["pool", "zone"]), st.sampled_from(["a", "b"]), max_size=2)


@given(
    st.lists(st.tuples(selectors, st.booleans()), min_size=1, max_size=4),
    st.lists(st.tuples(node_labels, st.one_of(st.none(), st.integers(0, 5))), max_size=8),
)
def test_property_one_owner_per_node_and_a_running_owner_never_moves(
    specs: list[tuple[dict[str, str], bool]], given_nodes: list[tuple[dict[str, str], int | None]]
) -> None:
    pools = [
        pool(f"p{i}", f"2026-01-0{i + 1}T00:00:00Z", sel or None, valid=valid)
        for i, (sel, valid) in enumerate(specs)
    ]
    found = {
        NodeName(f"n{i}"): {**GPU, **extra, **({OWNER: f"p{owner}"} if owner is not None else {})}
        for i, (extra, owner) in enumerate(given_nodes)
    }
    plan = driver_pools.plan_pool_owners(found, pools)
    by_name = {p.name: p for p in pools}
    for name, labels_now in found.items():
        current = labels_now.get(OWNER)
        owner = plan.owners.get(name)
        if owner is not None:
            # an owner is a pool that exists, and selects the node unless it is frozen or the default
            chosen = by_name[owner]
            assert (
                not chosen.valid
                or chosen.default
                or driver_pools.selects(chosen.selector, labels_now)
                or owner == current
            )
        if current in by_name and (
            not by_name[current].valid or driver_pools.selects(by_name[current].selector, labels_now)
        ):
            # a running driver stays where it is
            assert owner == current
        # the label written is the owner decided
        assert plan.label_changes.get(name, current) == owner


# --- the pool's DaemonSets ---------------------------------------------------------


def _dtk_nodes() -> tuple[driver_snapshot.GpuNode, ...]:
    return tuple(
        driver_snapshot.GpuNode(
            NodeName(name),
            ostree_version=driver_snapshot.RhcosVersion(rhcos),
            os_id="rhcos",
            os_version_id="4.16",
        )
        for name, rhcos in (("n1", "416.94.1-0"), ("n2", "416.94.2-0"))
    )


def _plan(existing: tuple[driver_snapshot.DriverDaemonSet, ...] = ()) -> driver_plan.DriverPlan:
    tags = tuple(
        driver_snapshot.ImageStreamTag(driver_snapshot.RhcosVersion(v), f"dtk@{v}")
        for v in ("416.94.1-0", "416.94.2-0")
    )
    stream = driver_snapshot.DriverToolkitStream(driver_snapshot.StreamState.PRESENT, tags)
    settings = driver_plan.DriverSettings(
        driver_strategy.Strategy.DTK, driver_image=images.ImageRef("nvcr.io/nvidia/driver:550.90.07")
    )
    return driver_plan.plan_driver_daemonsets(
        driver_snapshot.DriverSnapshot(_dtk_nodes(), existing, stream), settings
    )


def test_a_pools_daemonsets_are_named_for_the_pool_and_select_its_nodes_only() -> None:
    plan = driver_pools.for_pool(_plan(), "pool-a")
    assert [d.name for d in plan.desired] == [
        "nvidia-gpu-driver-pool-a-416.94.1-0",
        "nvidia-gpu-driver-pool-a-416.94.2-0",
    ]
    for entry in plan.desired:
        assert entry.node_selector[OWNER] == "pool-a"
        assert entry.node_selector[labels.OSTREE_VERSION] == str(entry.key)
        assert entry.selector[labels.NVIDIA_DRIVER] == entry.labels[labels.NVIDIA_DRIVER] == "pool-a"
        # the seed's `-lapp=nvidia-driver-daemonset` still lists every pool's driver pods
        assert entry.selector[labels.APP] == labels.DRIVER_APP
    other = driver_pools.for_pool(_plan(), "pool-b")
    assert not {tuple(sorted(d.selector.items())) for d in plan.desired} & {
        tuple(sorted(d.selector.items())) for d in other.desired
    }


def test_an_existing_pool_daemonset_keeps_its_name() -> None:
    first = driver_pools.for_pool(_plan(), "pool-a").desired[0]
    existing = driver_snapshot.DriverDaemonSet(name="renamed-by-hand", labels=dict(first.labels))
    again = driver_pools.for_pool(_plan((existing,)), "pool-a")
    assert {d.key: d.name for d in again.desired}[first.key] == "renamed-by-hand"


def test_a_key_that_left_the_pool_is_stale_at_once_whatever_its_counters() -> None:
    # n1 (416.94.1-0) moved to another pool: this pool's DaemonSet for its key goes in the same
    # pass, though the DaemonSet controller still counts n1's pod (it is misscheduled there now).
    applied = driver_pools.for_pool(_plan(), "pool-a").desired
    existing = tuple(
        driver_snapshot.DriverDaemonSet(
            name=d.name, labels=dict(d.labels), desired_number_scheduled=1, number_misscheduled=1
        )
        for d in applied
    )
    tags = tuple(
        driver_snapshot.ImageStreamTag(driver_snapshot.RhcosVersion(v), f"dtk@{v}")
        for v in ("416.94.1-0", "416.94.2-0")
    )
    settings = driver_plan.DriverSettings(
        driver_strategy.Strategy.DTK, driver_image=images.ImageRef("nvcr.io/nvidia/driver:550.90.07")
    )
    left = driver_plan.plan_driver_daemonsets(
        driver_snapshot.DriverSnapshot(
            _dtk_nodes()[1:],
            existing,
            driver_snapshot.DriverToolkitStream(driver_snapshot.StreamState.PRESENT, tags),
        ),
        settings,
    )
    assert [s.name for s in left.stale] == ["nvidia-gpu-driver-pool-a-416.94.1-0"]
    assert [d.name for d in driver_pools.for_pool(left, "pool-a").desired] == [
        "nvidia-gpu-driver-pool-a-416.94.2-0"
    ]


@pytest.mark.parametrize(
    ("pool_name", "key", "driver_type"),
    [
        ("a" * 200, "416.94.202407030122-0", "gpu"),
        ("pool", "5.14.0-427.13.1.el9_4.x86_64-rhcos4.16", "vgpu"),
        ("Pool_With.Odd", "ubuntu22.04", "gpu"),
    ],
)
def test_names_are_valid_and_stable(pool_name: str, key: str, driver_type: str) -> None:
    name = driver_pools.daemonset_name(pool_name, key, driver_type)
    assert name == driver_pools.daemonset_name(pool_name, key, driver_type)
    assert len(name) <= 63 and name[0].isalnum() and name[-1].isalnum()
    assert all(c.isdigit() or c.islower() or c in "-." for c in name)
    assert name.startswith(f"nvidia-{driver_type}-driver-")
    assert name != driver_pools.daemonset_name(pool_name + "x", key, driver_type)


def test_a_long_pool_name_gets_a_valid_distinct_label_value() -> None:
    long_a, long_b = "a" * 100, "a" * 99 + "b"
    assert len(driver_pools.owner_label_value(long_a)) <= 63
    assert driver_pools.owner_label_value(long_a) != driver_pools.owner_label_value(long_b)
    assert driver_pools.owner_label_value("short") == "short"


def test_the_policys_daemonsets_go_only_when_every_node_has_a_planned_pool() -> None:
    legacy = driver_snapshot.DriverDaemonSet(
        name="nvidia-driver-daemonset-416.94.1-0",
        labels={
            labels.DRIVER_STRATEGY: "dtk",
            labels.DRIVER_KEY: "416.94.1-0",
            labels.DTK_DAEMONSET: "true",
            labels.DTK_RHCOS: "416.94.1-0",
        },
    )
    pool_owned = driver_snapshot.DriverDaemonSet(
        name="nvidia-gpu-driver-a-x", labels={**legacy.labels, labels.NVIDIA_DRIVER: "a"}
    )
    gpu_nodes = _dtk_nodes()
    waiting = driver_pools.plan_policy_handover([legacy, pool_owned], gpu_nodes, {}, ["a"])
    assert waiting.delete == () and [k.nodes for k in waiting.kept] == [("n1",)]
    # owned by a pool that was not planned this pass (an invalid spec): still kept
    invalid = driver_pools.plan_policy_handover([legacy], gpu_nodes, {NodeName("n1"): "b"}, ["a"])
    assert invalid.delete == ()
    done = driver_pools.plan_policy_handover([legacy, pool_owned], gpu_nodes, {NodeName("n1"): "a"}, ["a"])
    assert done.delete == ("nvidia-driver-daemonset-416.94.1-0",) and done.kept == ()
    assert driver_pools.plan_policy_handover([legacy], gpu_nodes, {}, [], complete=False).delete == ()


# --- the NVIDIADriver over the ClusterPolicy ------------------------------------------


def _driver(spec: dict[str, object], name: str = "pool-a") -> nvidia_driver_spec.NvidiaDriver:
    return nvidia_driver_spec.NvidiaDriver(name, "uid-" + name, "2026-01-01T00:00:00Z", 1, spec)


POLICY = {
    "driver": {
        "useNvidiaDriverCRD": True,
        "version": "1.0.0",
        "upgradePolicy": {"maxParallelUpgrades": 3},
        "repoConfig": {"configMapName": "policy-repos"},
    },
    "daemonsets": {"labels": {"team": "gpu"}, "priorityClassName": "policy-class"},
}


def test_the_pool_spec_replaces_the_driver_section_but_keeps_the_upgrade_rules() -> None:
    spec = nvidia_driver_spec.cluster_policy_spec(
        POLICY, {"version": "550.90.07", "labels": {"pool": "a"}, "repoConfig": {"name": "pool-repos"}}
    )
    policy = policy_parser.parse_policy(spec)
    assert policy.driver.image.version == "550.90.07"
    assert policy.driver.repo_config_map == "pool-repos"
    assert policy.driver.upgrade_policy.max_parallel_upgrades == 3
    assert policy.daemonsets.labels == {"team": "gpu", "pool": "a"}
    assert policy.daemonsets.priority_class_name == "policy-class"
    # no driver field is inherited from the ClusterPolicy (as NVIDIA's NVIDIADriver)
    inherited = policy_parser.parse_policy(nvidia_driver_spec.cluster_policy_spec(POLICY, {}))
    assert not inherited.driver.repo_config_map


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"version": "not a version!"}, "spec.version"),
        ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "spec.env"),
        ({"driverType": "vgpu-host-manager"}, "spec.driverType"),
        ({"default": True, "nodeSelector": {"pool": "a"}}, "spec.nodeSelector"),
        ({"nodeSelector": {OWNER: "x"}}, f"spec.nodeSelector[{OWNER!r}]"),
        ({"nodeSelector": {"bad key!": "x"}}, "spec.nodeSelector['bad key!']"),
        ({"nodeSelector": {"pool": "bad value!"}}, "spec.nodeSelector['pool']"),
        ({"usePrecompiled": True, "gds": {"enabled": True}}, "spec.gds.enabled"),
        ({"upgradePolicy": {"maxUnavailable": "0"}}, "spec.upgradePolicy.maxUnavailable"),
        ({"upgradePolicy": {"maxUnavailable": "many"}}, "spec.upgradePolicy.maxUnavailable"),
        ({"upgradePolicy": {"maxParallelUpgrades": -1}}, "spec.upgradePolicy.maxParallelUpgrades"),
        ({"upgradePolicy": {"drain": {"podSelector": "app in (a"}}}, "spec.upgradePolicy.drain.podSelector"),
        (
            {"upgradePolicy": {"waitForCompletion": {"podSelector": "=x"}}},
            "spec.upgradePolicy.waitForCompletion.podSelector",
        ),
        (
            {"upgradePolicy": {"podDeletion": {"timeoutSeconds": -5}}},
            "spec.upgradePolicy.gpuPodDeletion.timeoutSeconds",
        ),
    ],
)
def test_bad_input_is_named_under_the_nvidia_driver_path(spec: dict[str, object], field: str) -> None:
    problems = pool_manifests.pool_policy(_driver(spec), POLICY, releases.installed_images())
    assert isinstance(problems, list), problems
    assert field in [problem.field for problem in problems], problems
    assert all(problem.fix for problem in problems)


def test_refused_fields_are_named_only_when_set() -> None:
    assert (
        nvidia_driver_spec.refused_settings({"virtualTopologyConfig": {"name": ""}, "hostNetwork": False})
        == {}
    )
    found = nvidia_driver_spec.refused_settings(
        {"upgradePolicy": {"autoUpgrade": False}, "nodeAffinity": {"x": 1}}
    )
    # upgradePolicy is honoured per pool (below)
    assert set(found) == {"spec.nodeAffinity"}


def _pool_upgrade(cluster_policy: dict[str, object], pool: dict[str, object]) -> policy_spec.UpgradePolicy:
    spec = nvidia_driver_spec.cluster_policy_spec({"driver": {"upgradePolicy": cluster_policy}}, pool)
    return policy_parser.parse_policy(spec).driver.upgrade_policy


def test_a_pool_without_upgrade_policy_has_the_cluster_policys() -> None:
    cluster_policy = {"maxParallelUpgrades": 3, "maxUnavailable": 2, "drain": {"enable": True, "force": True}}
    assert _pool_upgrade(cluster_policy, {}) == _pool_upgrade(cluster_policy, {"upgradePolicy": None})
    inherited = _pool_upgrade(cluster_policy, {})
    assert (inherited.max_parallel_upgrades, inherited.max_unavailable) == (3, 2)
    assert inherited.drain.enable and inherited.drain.force
    # neither sets one: the seed's defaults
    assert _pool_upgrade({}, {}) == policy_spec.UpgradePolicy()


def test_a_pool_upgrade_policy_wins_field_by_field_over_the_cluster_policys() -> None:
    cluster_policy = {
        "maxParallelUpgrades": 3,
        "maxUnavailable": "50%",
        "drain": {"enable": True, "force": True, "timeoutSeconds": 60},
        "waitForCompletion": {"podSelector": "app=train"},
    }
    pool = _pool_upgrade(cluster_policy, {"upgradePolicy": {"autoUpgrade": False, "drain": {"force": False}}})
    assert not pool.auto_upgrade
    assert (pool.max_parallel_upgrades, pool.max_unavailable) == (3, "50%")
    # inside an object too: the pool's force, the ClusterPolicy's enable and timeout
    assert pool.drain.enable and not pool.drain.force and pool.drain.timeout_seconds == 60
    assert pool.wait_for_completion.pod_selector == "app=train"
    other = _pool_upgrade(cluster_policy, {"upgradePolicy": {"maxParallelUpgrades": 1}})
    assert other.auto_upgrade and other.max_parallel_upgrades == 1


@pytest.mark.parametrize("pool_name", ["podDeletion", "gpuPodDeletion"])
@pytest.mark.parametrize("policy_name", ["podDeletion", "gpuPodDeletion"])
def test_the_pools_pod_deletion_wins_under_either_name(pool_name: str, policy_name: str) -> None:
    cluster_policy = {policy_name: {"force": True, "timeoutSeconds": 60}}
    pool = _pool_upgrade(cluster_policy, {"upgradePolicy": {pool_name: {"force": False}}})
    assert not pool.gpu_pod_deletion.force
    assert pool.gpu_pod_deletion.timeout_seconds == 60


@pytest.mark.parametrize(
    ("policy_field", "pool_field"),
    [
        ("spec.driver.version", "spec.version"),
        ("spec.driver.repoConfig.configMapName", "spec.repoConfig.name"),
        ("spec.driver.licensingConfig.configMapName", "spec.licensingConfig.name"),
        ("spec.driver.env[1].name", "spec.env[1].name"),
        ("spec.daemonsets.tolerations[0].key", "spec.tolerations[0].key"),
        ("spec.gds.version", "spec.gds.version"),
        ("spec.driver.upgradePolicy.maxUnavailable", "spec.upgradePolicy.maxUnavailable"),
        ("spec.driver.precompiledFallback.imagePullTimeoutSeconds", None),
        ("spec.driver.versionX", None),
        ("spec.operator.runtimeClass", None),
    ],
)
def test_field_paths_map_back(policy_field: str, pool_field: str | None) -> None:
    assert nvidia_driver_spec.nvidia_driver_field(policy_field) == pool_field


def test_the_mode_is_on_only_when_the_policy_says_true() -> None:
    assert nvidia_driver_spec.is_mode_enabled({"driver": {"useNvidiaDriverCRD": True}})
    assert not nvidia_driver_spec.is_mode_enabled({"driver": {"useNvidiaDriverCRD": False}})
    assert not nvidia_driver_spec.is_mode_enabled({})
    assert _driver({}).node_selector == {labels.GPU_PRESENT: "true"}
    assert driver_snapshot.DriverKey("x") == "x"


@pytest.mark.parametrize(
    ("cluster_policy", "pool", "expected"),
    [
        ({}, {}, True),
        ({"autoUpgrade": False}, {}, False),
        ({"autoUpgrade": False}, {"upgradePolicy": {"autoUpgrade": True}}, True),
        ({}, {"upgradePolicy": {"autoUpgrade": False}}, False),
        ({"autoUpgrade": False}, {"upgradePolicy": {"maxParallelUpgrades": 2}}, False),
    ],
)
def test_the_node_labeller_reads_the_pools_auto_upgrade_as_the_parser_does(
    cluster_policy: dict[str, object], pool: dict[str, object], expected: bool
) -> None:
    spec = {"driver": {"useNvidiaDriverCRD": True, "upgradePolicy": cluster_policy}}
    assert nvidia_driver_spec.pool_auto_upgrade(spec, pool) is expected
    assert _pool_upgrade(cluster_policy, pool).auto_upgrade is expected
