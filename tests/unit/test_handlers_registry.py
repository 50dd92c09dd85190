"""We test these aspects of the kopf registrations (handlers.py):

- every kind is watched through index and event handlers only: no change-detecting handler
  (on.create/on.update/on.resume/on.field) and no daemon or timer, on any kind, OpenShift or
  vanilla, with or without the NVIDIADriver API; kopf would otherwise write its diff-base
  annotation on every object, and the diff base we switch off (handlers.NoDiffBase) would be needed;
- the settings use that diff base, which copies nothing (issue 13: a third of the start-up CPU).
"""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

from ocp_gpu import handlers
from ocp_gpu.model import apis
from ocp_gpu.reconcilers import runtime

ALL_GROUPS = frozenset(
    {apis.IMAGE_GROUP, apis.CONFIG_GROUP, "monitoring.coreos.com", "security.openshift.io"}
)


@pytest.mark.parametrize("groups", [frozenset(), ALL_GROUPS], ids=["vanilla", "openshift"])
@pytest.mark.parametrize("nvidia_driver_api", [False, True], ids=["no-nvidiadriver", "nvidiadriver"])
def test_only_index_and_event_handlers(groups: frozenset[str], nvidia_driver_api: bool) -> None:
    rt = runtime.Runtime(api_client=None, namespace="ns", env={})
    rt.view.api_groups = groups
    rt.view.nvidia_driver_api = nvidia_driver_api
    registry = handlers.build_registry(rt)
    # NB: kopf's per-kind registries are private; they are what its processing consults.
    assert list(registry._changing.get_all_handlers()) == []
    assert list(registry._spawning.get_all_handlers()) == []
    assert list(registry._watching.get_all_handlers()), "no event handler at all: the test is broken"
    assert list(registry._indexing.get_all_handlers())


def test_the_diff_base_copies_nothing() -> None:
    settings = handlers.operator_settings()
    storage = settings.persistence.diffbase_storage
    assert isinstance(storage, handlers.NoDiffBase)
    body = kopf.Body(cast(Any, {"metadata": {"name": "n1", "labels": {"a": "b"}}, "spec": {"x": 1}}))
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None
