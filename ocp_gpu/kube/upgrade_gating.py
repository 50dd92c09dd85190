"""Writing the operator's OLM OperatorCondition: `Upgradeable` as planning/upgrade_gate decides it.

OLM creates one OperatorCondition per installed CSV (`operators.coreos.com/v2`, in the
operator's namespace) and names it in the env var OPERATOR_CONDITION_NAME it injects into the
operator's Deployment; the operator writes `spec.conditions`, which OLM reads (with the
admin's `spec.overrides`) before replacing the CSV by a newer one.  Installed by Helm or run
by hand there is no env var, and without OLM there is no CRD: then this does nothing and
says so once in the log.

A write happens only when the condition changes (the last one written is remembered; a 409
is retried once on a fresh read, else on the next change or pass).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ocp_gpu.kube import clients, requesting
from ocp_gpu.planning.upgrades import upgrade_gate

logger = logging.getLogger("ocp_gpu.upgrade_gate")

# Set by OLM in the operator's Deployment: the name of its OperatorCondition.
CONDITION_NAME_ENV = "OPERATOR_CONDITION_NAME"
GROUP = "operators.coreos.com"
VERSION = "v2"
PLURAL = "operatorconditions"


class UpgradeGate:
    """The operator's OperatorCondition, written when `Upgradeable` changes (blocking: call in a thread)."""

    def __init__(self, api_client: clients.ApiClient, namespace: str, env: Mapping[str, str]) -> None:
        self._api_client = api_client
        self._namespace = namespace
        self._name = env.get(CONDITION_NAME_ENV, "").strip()
        self._written: upgrade_gate.Upgradeable | None = None
        self._said_off = False

    @property
    def enabled(self) -> bool:
        """OLM named our OperatorCondition (else nothing is ever written)."""
        return bool(self._name)

    @property
    def idle(self) -> bool:
        """Not named by OLM, and the log has said so once: nothing will ever be written."""
        return not self._name and self._said_off

    def says(self, wanted: upgrade_gate.Upgradeable) -> bool:
        """Whether the OperatorCondition was last written with `wanted` (by us)."""
        return wanted == self._written

    def update(self, wanted: upgrade_gate.Upgradeable) -> None:
        """Make the OperatorCondition's `Upgradeable` say `wanted` (a no-op when it already does)."""
        if not self._name:
            self._off_once(f"${CONDITION_NAME_ENV} is not set (not installed by OLM)")
            return
        if wanted == self._written:
            return
        for attempt in (1, 2):
            try:
                self._write(wanted)
                return
            except requesting.ApiException as error:
                if error.status == 404:
                    # no CRD (no OLM) or no such OperatorCondition: nothing to gate
                    self._off_once(
                        f"no OperatorCondition {self._namespace}/{self._name} "
                        f"({GROUP}/{VERSION} {PLURAL} not served, or not created by OLM)"
                    )
                    return
                if error.status == 409 and attempt == 1:
                    continue  # someone wrote it since our read: read again
                logger.warning(
                    "could not write Upgradeable=%s to OperatorCondition %s/%s: %s",
                    wanted.status,
                    self._namespace,
                    self._name,
                    requesting.describe_error(error),
                )
                return

    def _write(self, wanted: upgrade_gate.Upgradeable) -> None:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{quote(self._namespace)}/{PLURAL}/{quote(self._name)}"
        current: dict[str, Any] = requesting.request(self._api_client, "GET", path)
        conditions = (current.get("spec") or {}).get("conditions") or []
        if not upgrade_gate.is_written(conditions, wanted):
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            requesting.request(
                self._api_client,
                "PATCH",
                path,
                # NB: the resourceVersion makes the merge patch conditional (409 when it moved):
                # the list is replaced whole, so another writer's condition must not be lost.
                body={
                    "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                    "spec": {"conditions": upgrade_gate.with_condition(conditions, wanted, now)},
                },
                content_type=requesting.MERGE_PATCH,
                resource=PLURAL,
                verb="patch",
            )
            logger.info(
                "OperatorCondition %s/%s: Upgradeable=%s (%s): %s",
                self._namespace,
                self._name,
                wanted.status,
                wanted.reason.value,
                wanted.message,
            )
        self._written = wanted
        self._said_off = False

    def _off_once(self, why: str) -> None:
        if not self._said_off:
            logger.info("not reporting Upgradeable to OLM: %s", why)
            self._said_off = True
