"""We test these aspects: a DaemonSet deleted on a mode switch is marked superseded (its nodes keep
their key by design), one deleted because its key has no node left is not; the reconciler's
last-read safety check depends on that distinction."""

from __future__ import annotations

from ocp_gpu.planning.drivers.driver_strategy import Strategy

from ._drivers import V416, V417, applied, plan, rhcos_node


def test_mode_switch_marks_the_old_daemonset_superseded() -> None:
    nodes = [rhcos_node("a", V416), rhcos_node("b", V416)]
    old = applied(nodes, Strategy.DTK)
    new = applied(nodes, Strategy.VANILLA)
    result = plan(nodes, Strategy.VANILLA, daemonsets=[*old, *new])
    assert [(s.name, s.superseded) for s in result.stale] == [(old[0].name, True)]


def test_key_without_nodes_is_stale_but_not_superseded() -> None:
    before = [rhcos_node("a", V416)]
    after = [rhcos_node("a", V417)]
    old = applied(before, Strategy.DTK, desired=0)
    result = plan(after, Strategy.DTK, daemonsets=old)
    assert [(s.name, s.superseded) for s in result.stale] == [(old[0].name, False)]
