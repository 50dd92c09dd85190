"""Following one node's pods through a short WATCH, from the resourceVersion of a LIST of them.

A driver upgrade deletes a node's GPU pods and goes on once they are gone (no watch of the
operator covers workload pods).  Reading the node's pods again and again until then cost a
LIST each and, between reads, up to the poll's interval of waiting (issue 13: pod deletion ->
pod restart took 0.39 s p50 at 100 nodes, most of it waiting for the next read).  A WATCH of
the node's pods from the LIST's resourceVersion sees every change since that read, and the
pod's going the moment the API server has it; the pods it keeps up to date are exactly what a
fresh read would return, so the chain goes on without another LIST.

Thin I/O: the condition to wait for is the caller's (planning/upgrade_pipeline.are_gone).
The time up answers None (the pods are still there: the passes read them from then on, as
after the reads it replaces); anything unexpected (an error status, 410 Gone, a broken
connection) raises FollowFailed, and the caller reads the pods as before.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp

from ocp_gpu.kube import connecting, upgrading, watching
from ocp_gpu.model.upgrade_observations import WorkloadPod

logger = logging.getLogger("ocp_gpu.watching")

CONNECT_TIMEOUT_S: Final = 10.0
# Watches open at once; more wait for a connection (within their own time limit). NB: with no
# parallel limit every node of the cluster may wait for its GPU pods at the same moment.
CONNECTIONS: Final = 64


class FollowFailed(Exception):
    """The watch could not follow the pods (an error status, 410 Gone, a broken connection)."""


@dataclasses.dataclass(frozen=True)
class Followed:
    """A node's pods as a watch left them, and the resourceVersion they are at."""

    pods: tuple[WorkloadPod, ...]
    version: str


def apply_event(pods: dict[str, WorkloadPod], event: Mapping[str, Any]) -> str:
    """Apply one watch event to `pods` (by uid); the resourceVersion it brings ("" for none).

    Raises FollowFailed for an ERROR event (410 Gone: the version is too old).
    """
    kind = event.get("type")
    body = event.get("object") or {}
    if kind == "ERROR":
        raise FollowFailed(str(body.get("message") or body))
    version = str((body.get("metadata") or {}).get("resourceVersion") or "")
    if kind == "DELETED":
        pods.pop(str((body.get("metadata") or {}).get("uid", "")), None)
    elif kind in ("ADDED", "MODIFIED"):
        pod = upgrading.workload_pod(body)
        pods[pod.ref.uid] = pod
    # NB: BOOKMARK: nothing changed but the version.
    return version


class PodFollower:
    """One HTTP session for every node's short pod watches (opened on first use)."""

    def __init__(self, login: connecting.Login) -> None:
        self._api = watching.ApiSession(login, "ocp-gpu/upgrade-pod-watch", connections=CONNECTIONS)

    async def close(self) -> None:
        await self._api.close()

    async def follow(
        self,
        node: str,
        since: Followed,
        done: Callable[[tuple[WorkloadPod, ...]], bool],
        timeout_s: float,
    ) -> Followed | None:
        """The node's pods once `done` holds for them, watched from `since` (a LIST's pods and
        resourceVersion, or an earlier follow's); None if it does not within `timeout_s`.

        Raises FollowFailed when the watch cannot follow (the caller reads the pods instead).
        """
        current = {pod.ref.uid: pod for pod in since.pods}
        if done(since.pods):
            return since
        if not since.version:
            raise FollowFailed("no resourceVersion to watch from")
        version = since.version
        query = [
            ("fieldSelector", f"spec.nodeName={node}"),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", version),
            ("timeoutSeconds", str(max(1, math.ceil(timeout_s)))),
        ]
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=CONNECT_TIMEOUT_S)
        try:
            session = self._api.http()
            url = self._api.server + "/api/v1/pods"
            async with session.get(url, params=query, timeout=timeout) as response:
                if response.status != 200:
                    if response.status == 401:
                        await self._api.renew()
                    raise FollowFailed(f"the watch answered {response.status}")
                async for event in watching.event_lines(response.content):
                    version = apply_event(current, event) or version
                    pods = tuple(current.values())
                    if done(pods):
                        return Followed(pods, version)
        except TimeoutError:
            return None
        except (aiohttp.ClientError, OSError, ValueError) as error:
            raise FollowFailed(f"{type(error).__name__}: {error}") from error
        # The server ended the watch (its timeoutSeconds) first.
        return None
