"""What every view fed by one of our own watches (kube/watching.py) shares: its place in the
start-up barrier, and what a complete listing means.

Glue: a listing is the whole truth of its kind, so whatever the view holds that the listing
lacks was deleted while no watch was open (a re-list after 410 Gone) and is forgotten; then
every listed object is seen, and the kind counts as delivered (no pass runs before that).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from ocp_gpu.reconcilers import runtime


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


class WatchedView(Generic[N]):
    """The sink of one of our own watches (kube/watching.Sink); `seen`, `gone`, `known` per kind."""

    def __init__(self, rt: runtime.Runtime, group: str, plural: str) -> None:
        # What the view keeps (the watches' records), whom it wakes, and the pass's label patches.
        self._view = rt.view
        self._scheduler = rt.scheduler
        self._cache = rt.cache
        self._namespace = rt.namespace
        self._group = group
        self._plural = plural
        rt.view.watch(group, plural)

    def known(self) -> Iterable[str]:
        """The names the view holds now."""
        raise NotImplementedError

    def seen(self, facts: N) -> None:
        raise NotImplementedError

    def gone(self, name: str) -> None:
        raise NotImplementedError

    def listed(self, facts: Sequence[N]) -> None:
        present = {fact.name for fact in facts}
        # Deleted while no watch was open (a re-list after 410 Gone): forget them too.
        for name in [name for name in self.known() if name not in present]:
            self.gone(name)
        for fact in facts:
            self.seen(fact)
        self._view.mark_delivered(self._group, self._plural)
