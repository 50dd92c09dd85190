"""`ocp-gpu run`: elect a leader, watch, and reconcile until stopped or deposed.

Order of life: serve probes and metrics -> wait for the Lease -> start the
watches (ocp_gpu/watches.py) and the reconcile loops -> renew the Lease.  Losing the Lease stops the
process (exit code 1) so that it restarts as a standby: no replica ever acts
on a view it cannot trust to be the only one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ocp_gpu import memory, metrics, serving, watches
from ocp_gpu.kube import clients, connecting, discovering, electing
from ocp_gpu.model import apis, labels, releases, resource_claims
from ocp_gpu.reconcilers import cluster, runtime, upgrade_reconciler

logger = logging.getLogger("ocp_gpu.operator")

# Seconds the tasks have to end once cancelled; past that the process exits anyway (`stop_tasks`).
STOP_GRACE_S = 10.0


@dataclasses.dataclass(frozen=True)
class RunOptions:
    kubeconfig: Path | None
    namespace: str
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8080
    election: electing.ElectionSettings | None = None
    # Watch events within this window of the last pass coalesce into the next one (the first
    # event after a quiet spell runs a pass at once: scheduling.Coalescer).
    coalesce_s: float = 0.2
    # The same for upgrade passes: a batch of driver pods turning Ready lands in one pass.
    # NB: shorter than the main pass's: every upgrade pass's own writes wake the next, so the
    # window is paid on each step of each node in flight (0.2 s of a ~0.55 s cycle at 1,000
    # nodes, maxParallelUpgrades 10), and a pass plans 1,000 nodes in about 8 ms.
    upgrade_coalesce_s: float = 0.05


def default_namespace(env: Mapping[str, str]) -> str:
    """The operator's namespace: OPERATOR_NAMESPACE (downward API), else the OpenShift default."""
    return env.get("OPERATOR_NAMESPACE") or labels.OPENSHIFT_NAMESPACE


async def stop_tasks(tasks: Mapping[asyncio.Future[Any], str], grace_s: float) -> set[str]:
    """Cancel `tasks` (future -> name) and wait at most `grace_s` for them to end; the names of
    those still running.

    NB: a task that swallows its cancellation runs on (asyncio.wait_for did so on Python 3.11:
    reconcilers/scheduling.wait_event); awaited without a bound, it kept a leader that had lost
    its Lease writing node labels and deleting driver pods for minutes (issue 30)."""
    for task in tasks:
        if not task.done():
            task.cancel()
    done, pending = await asyncio.wait(tasks, timeout=grace_s)
    await asyncio.gather(*done, return_exceptions=True)
    return {tasks[task] for task in pending}


async def run(options: RunOptions) -> int:
    # Before the executor's and kopf's threads exist (memory.limit_malloc_arenas says why).
    memory.limit_malloc_arenas()
    memory.small_tls_read_buffers()
    health = serving.Health()
    # First the configuration: a missing kubeconfig fails before anything starts (clients.ConfigError),
    # in the one line of its error (tests/unit/test_messages.py).
    api_client = clients.load_api_client(options.kubeconfig)
    # The imports are done: from here to the Lease is the election (how long a start takes, in the log).
    logger.info("started (namespace %s); electing a leader", options.namespace)
    server = serving.serve(options.metrics_address, options.metrics_port, health)
    election = options.election or electing.ElectionSettings(namespace=options.namespace)
    # The election runs in a process of its own: nothing the reconcilers do delays a renewal.
    elector = electing.ElectionProcess(clients.lease_credentials(api_client), election)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Threads for blocking API calls: a pass keeps WRITE_CONCURRENCY of them busy, plus the lease.
    loop.set_default_executor(ThreadPoolExecutor(max_workers=runtime.WRITE_CONCURRENCY + 4))
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)

    health.role, health.ready = "standby", True
    acquiring = asyncio.ensure_future(elector.acquire())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not acquiring.done():
        acquiring.cancel()
        elector.stop()
        server.shutdown()
        return 0
    stopping.cancel()

    health.role = "leader"
    metrics.is_leader.set(1)
    # Renew from the moment we lead: discovery below can take seconds on a loaded apiserver.
    renewing = asyncio.ensure_future(elector.keep_renewing())
    # Image defaults: the release's by digest, as the install sets them (model/releases.py),
    # overridden by the *_IMAGE env vars.
    env = releases.with_release_defaults(os.environ)
    rt = runtime.Runtime(api_client=api_client, namespace=options.namespace, env=env)
    rt.view.api_groups = await asyncio.to_thread(discovering.list_api_groups, api_client)
    # NB: NVIDIADrivers are watched only when their CRD is installed (the bundle and chart ship it).
    rt.view.nvidia_driver_api = await asyncio.to_thread(
        discovering.serves_resource,
        api_client,
        apis.NVIDIA_DRIVER_GROUP,
        apis.NVIDIA_DRIVER_VERSION,
        apis.NVIDIA_DRIVER_PLURAL,
    )
    # NB: GPUClusters too (the bundle and chart ship NVIDIA's CRD; an older install may lack it).
    rt.view.gpu_cluster_api = await asyncio.to_thread(
        discovering.serves_resource,
        api_client,
        apis.GPU_CLUSTER_GROUP,
        apis.GPU_CLUSTER_VERSION,
        apis.GPU_CLUSTER_PLURAL,
    )
    # NB: ResourceClaims are watched only when resource.k8s.io/v1 is served (Kubernetes >= 1.34).
    rt.view.resource_claim_api = await asyncio.to_thread(
        discovering.serves_resource,
        api_client,
        resource_claims.API_GROUP,
        resource_claims.API_VERSION,
        resource_claims.CLAIMS_PLURAL,
    )

    # Every watch logs in with the credentials our own client uses (one kubeconfig loader).
    def login(renew: bool) -> connecting.ConnectionInfo:
        return connecting.connection_info(api_client, renew=renew)

    every_watch = watches.build_watches(rt, login)
    tasks: dict[asyncio.Future[Any], str] = {
        asyncio.ensure_future(watch.run()): f"{kind} watch" for kind, watch in every_watch.items()
    }
    tasks |= {
        asyncio.ensure_future(cluster.reconcile_forever(rt, options.coalesce_s)): "reconciler",
        asyncio.ensure_future(upgrade_reconciler.upgrade_forever(rt, options.upgrade_coalesce_s)): "upgrades",
        renewing: "lease",
        asyncio.ensure_future(stop.wait()): "signal",
    }
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    ended = {tasks[task] for task in done}
    logger.info("stopping: %s ended", ", ".join(sorted(ended)))
    if stuck := await stop_tasks(tasks, STOP_GRACE_S):
        # A deposed leader must never write again; nor may a stopping one go on.
        logger.error(
            "stopping: %s did not end within %.0f s of being cancelled; exiting now",
            ", ".join(sorted(stuck)),
            STOP_GRACE_S,
        )
        logging.shutdown()
        os._exit(1)
    metrics.is_leader.set(0)
    if "lease" in ended:
        # Deposed: exit non-zero so the Deployment restarts us as a standby.
        elector.stop()
        server.shutdown()
        return 1
    await asyncio.to_thread(elector.release)
    server.shutdown()
    return 0
