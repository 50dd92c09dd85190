"""We test these aspects: which watched changes run the next pass at once (planning/urgency),
and that the coalescer's window ends as soon as one arrives (reconcilers/runtime.Coalescer).

- a known GPU node whose RHCOS build, OS or kernel changes is urgent; a label that keys no
  driver, a heartbeat-like change, a joining or leaving node are not;
- a node that gains or loses its NVIDIA PCI label is urgent (it enters or leaves every key);
- a driver DaemonSet is urgent at the moment the DaemonSet controller reports it drained
  (no pod wanted, none misscheduled), not when it is first seen with zeros, nor while it
  stays drained, nor while it still has pods;
- Coalescer.settle waits out the window, returns at once when the urgent event is already set,
  and returns as soon as it is set during the wait.
"""

from __future__ import annotations

import asyncio
import dataclasses

from ocp_gpu.model import labels, nodes
from ocp_gpu.model.snapshot import DriverDaemonSet
from ocp_gpu.planning import urgency
from ocp_gpu.reconcilers import runtime

V1 = "416.94.202407030122-0"
V2 = "416.94.202407240000-0"


def facts(**changed: str) -> nodes.NodeFacts:
    found = {
        labels.NFD_NVIDIA_PCI: "true",
        labels.OSTREE_VERSION: V1,
        labels.OS_ID: "rhcos",
        labels.OS_VERSION_ID: "4.16",
        labels.KERNEL_VERSION_FULL: "5.14.0-427.22.1.el9_4.x86_64",
        "example.com/rack": "a",
    }
    found.update(changed)
    return nodes.NodeFacts(
        name=nodes.NodeName("gpu-1"),
        labels={key: value for key, value in found.items() if value},
        os_image=f"Red Hat Enterprise Linux CoreOS {V1} (Plow)",
        kernel_version="5.14.0-427.22.1.el9_4.x86_64",
        unschedulable=False,
        gpus=1,
    )


def test_a_new_rhcos_build_is_urgent() -> None:
    assert urgency.moves_driver_key(facts(), facts(**{labels.OSTREE_VERSION: V2}))


def test_a_new_os_or_kernel_is_urgent() -> None:
    assert urgency.moves_driver_key(facts(), facts(**{labels.OS_VERSION_ID: "4.17"}))
    assert urgency.moves_driver_key(facts(), facts(**{labels.KERNEL_VERSION_FULL: "5.14.0-500.el9.x86_64"}))


def test_a_node_losing_its_key_label_is_urgent() -> None:
    assert urgency.moves_driver_key(facts(), facts(**{labels.OSTREE_VERSION: ""}))


def test_becoming_or_ceasing_to_be_a_gpu_node_is_urgent() -> None:
    assert urgency.moves_driver_key(facts(**{labels.NFD_NVIDIA_PCI: ""}), facts())
    assert urgency.moves_driver_key(facts(), facts(**{labels.NFD_NVIDIA_PCI: ""}))


def test_other_changes_are_not_urgent() -> None:
    assert not urgency.moves_driver_key(facts(), facts(**{"example.com/rack": "b"}))
    assert not urgency.moves_driver_key(facts(), dataclasses.replace(facts(), unschedulable=True))
    assert not urgency.moves_driver_key(facts(), facts())


def test_non_gpu_nodes_changing_os_are_not_urgent() -> None:
    before = facts(**{labels.NFD_NVIDIA_PCI: ""})
    after = facts(**{labels.NFD_NVIDIA_PCI: "", labels.OSTREE_VERSION: V2})
    assert not urgency.moves_driver_key(before, after)


def test_joining_and_leaving_nodes_coalesce() -> None:
    assert not urgency.moves_driver_key(None, facts())
    assert not urgency.moves_driver_key(facts(), None)


def daemonset(desired: int, misscheduled: int = 0) -> DriverDaemonSet:
    return DriverDaemonSet(
        name="nvidia-driver-daemonset-" + V2,
        desired_number_scheduled=desired,
        number_misscheduled=misscheduled,
    )


def test_a_daemonset_becoming_drained_is_urgent() -> None:
    assert urgency.drained(daemonset(1), daemonset(0))
    assert urgency.drained(daemonset(0, misscheduled=1), daemonset(0))


def test_a_daemonset_with_pods_left_is_not_drained() -> None:
    assert not urgency.drained(daemonset(1), daemonset(0, misscheduled=1))
    assert not urgency.drained(daemonset(2), daemonset(1))


def test_a_new_or_still_empty_daemonset_is_not_urgent() -> None:
    # A DaemonSet just created reports zeros until the controller counts its nodes.
    assert not urgency.drained(None, daemonset(0))
    assert not urgency.drained(daemonset(0), daemonset(0))


def test_settle_waits_out_the_window_without_urgency() -> None:
    async def scenario() -> float:
        coalescer = runtime.Coalescer(0.2)
        coalescer.ended()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await coalescer.settle(asyncio.Event())
        return loop.time() - started

    assert asyncio.run(scenario()) >= 0.19


def test_settle_returns_at_once_when_urgent_already() -> None:
    async def scenario() -> float:
        coalescer = runtime.Coalescer(5.0)
        coalescer.ended()
        urgent = asyncio.Event()
        urgent.set()
        loop = asyncio.get_running_loop()
        started = loop.time()
        await coalescer.settle(urgent)
        return loop.time() - started

    assert asyncio.run(scenario()) < 1.0


def test_settle_ends_when_an_urgent_change_arrives() -> None:
    async def scenario() -> float:
        coalescer = runtime.Coalescer(5.0)
        coalescer.ended()
        urgent = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, urgent.set)
        started = loop.time()
        await coalescer.settle(urgent)
        return loop.time() - started

    assert 0.04 <= asyncio.run(scenario()) < 1.0
