"""The operator's watch of one kind: one paged LIST, then one WATCH that stays open.

Each event is decoded once and turned into one small frozen record by the kind's converter
(`parse`: the facts the view keeps, never the whole body), handed to a sink. Every kind the
operator watches comes through here (ocp_gpu/watches.py lists them): the operand pods
(kube/pod_watch.py), the nodes (kube/node_watch.py) and our DaemonSets
(kube/daemonset_watch.py), the kinds with the most objects and events, and the few objects of
every other kind (kube/object_watches.py). kopf's per-object machinery (a worker task,
causes, kwargs wrappers, index and event handlers, then our converters on the same body) was
most of the operator's start-up CPU (issue 13); docs/architecture.md ("Watches") says what is
left of kopf.

The stream: a paged LIST (`LIST_PAGE`) of the path, optionally label-selected,
then a WATCH from its resourceVersion with bookmarks. A stream that ends resumes from the
last resourceVersion seen (one request); 410 Gone lists again; a connection refused or reset
(the API server restarting) retries with backoff; 401 logs in again. The decisions are
planning/watch_resumption.py's.

NB: credentials are kopf's `ConnectionInfo` from the same kubeconfig as everything else,
made into an aiohttp session as kopf makes its own (kube/connecting.py); `login(True)`
after a 401 asks for renewed ones (an exec plugin run again, a token file re-read).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, Generic, Protocol, TypeVar

import aiohttp

from ocp_gpu.kube import connecting
from ocp_gpu.planning import watch_resumption
from ocp_gpu.planning.watch_resumption import Step

logger = logging.getLogger("ocp_gpu.watching")

F = TypeVar("F")
F_contra = TypeVar("F_contra", contravariant=True)

# The server ends a watch after this long (a new one resumes at once, one request): long, so
# that steady state costs no request.
WATCH_TIMEOUT_S: Final = 1800
# No byte at all for this long after the server should have ended the watch: the connection
# is dead (a partition; a killed API server closes it at once), resume anew.
# NB: not a short inactivity timeout as kopf's (70 s): bookmarks do not reliably arrive that
# often on a quiet watch (kopf re-opened quiet kinds' watches up to twice in the 120 s steady
# window at 1,000 nodes), and every such re-open is a request in steady state.
INACTIVITY_MARGIN_S: Final = 60.0
CONNECT_TIMEOUT_S: Final = 30.0
LIST_TIMEOUT_S: Final = 120.0
# Objects per page of the initial LIST (not requesting.LIST_PAGE's 500). NB: a page is decoded
# whole while the records kept for good are made from it, and CPython gives back a 1 MiB arena
# only once it is empty: every arena a page touched stays resident for the records in it. At
# 5,000 nodes pages of 500 leave 8.1 MiB resident, pages of 100 4.5 (the records alone about
# 4; bench/list_pages.py, issue 13); 50 requests instead of 10 cost the apiserver nothing.
LIST_PAGE: Final = 100


# Where an object's managedFields begin, and where its metadata ends right after them (below).
_MANAGED_FIELDS: Final = b',"managedFields":['
_METADATA_END: Final = b']},"spec":'


def without_managed_fields(raw: bytes | bytearray) -> bytes | bytearray:
    """The JSON of a watch event or a list page with every object's `metadata.managedFields` cut
    out, before it is decoded: nothing we keep reads them, and they were about half of every
    pod's, node's and DaemonSet's bytes and of the time to decode them (issue 13, start-up CPU).

    NB: the API server writes a built-in kind's fields in its Go struct's order: managedFields
    is the last field of metadata, and `spec` follows metadata. So an object's managedFields end
    at the first `]},"spec":` after they start: inside them an unescaped `"` only opens or ends
    a key or a string (never `"spec"`: their keys are manager, operation, time, `f:`-prefixed
    fields, ...), and the only array is their own. Anything else (no spec, another order, as
    a custom resource's sorted keys) finds no end and is left whole; the caller decodes the
    original when the cut does not decode (`decode`).
    """
    parts: list[bytes | bytearray] = []
    done = 0
    while (start := raw.find(_MANAGED_FIELDS, done)) >= 0:
        end = raw.find(_METADATA_END, start)
        if end < 0:
            break
        parts.append(raw[done:start])
        # Keep `},"spec":`: metadata closes where the array did.
        done = end + 1
    if not parts:
        return raw
    parts.append(raw[done:])
    return b"".join(parts)


def decode(raw: bytes | bytearray) -> Any:
    """One watch event's or list page's JSON, decoded without managedFields where they can be cut."""
    cut = without_managed_fields(raw)
    if cut is raw:
        return json.loads(raw)
    try:
        return json.loads(cut)
    except ValueError:
        # NB: never expected (see without_managed_fields); the whole object is still right.
        return json.loads(raw)


class Sink(Protocol[F_contra]):
    """Where a watch hands what it saw (reconcilers/pod_view.PodView, reconcilers/node_view.NodeView)."""

    def listed(self, facts: Sequence[F_contra]) -> None:
        """A complete listing: these objects and no others exist (also after a re-list)."""

    def seen(self, facts: F_contra) -> None:
        """An object was added or changed."""

    def gone(self, name: str) -> None:
        """An object was deleted."""


class StatusError(Exception):
    """The API server answered a LIST or WATCH with an HTTP error status (or an ERROR event)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {_status_text(message)[:300]}")
        self.status = status


def _status_text(body: str) -> str:
    """A refusal as the log shows it: a Status object's reason and message (not its JSON, whose
    reason comes last and was cut), anything else as it came."""
    try:
        decoded = json.loads(body)
    except ValueError:
        return body
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return f"{decoded.get('reason') or ''}: {decoded.get('message') or ''}"
    return body


class ApiSession:
    """One HTTP session to the API server: logged in on first use, and again after a 401."""

    def __init__(self, login: connecting.Login, user_agent: str, connections: int = 100) -> None:
        self._login = login
        self._user_agent = user_agent
        # aiohttp's connection limit (its default: 100); more requests wait for a connection.
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        # The API server's URL, known once logged in.
        self.server = ""
        # The API server refused the credentials (401): the next login renews them.
        self._renew = False

    def http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            info, self._renew = self._login(self._renew), False
            self.server = info.server.rstrip("/")
            self._session = connecting.open_session(info, self._user_agent, self._connections)
        return self._session

    async def renew(self) -> None:
        """The credentials were refused: the next session logs in afresh."""
        self._renew = True
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()
            self._session = None


class ObjectWatch(Generic[F]):
    """List, then watch, the objects at one collection path, forever (until cancelled).

    NB: for built-in kinds (pods, nodes, DaemonSets): their JSON is cut before decoding on the
    API server's field order for them (`without_managed_fields`).
    """

    def __init__(
        self,
        login: connecting.Login,
        path: str,
        parse: Callable[[Mapping[str, Any]], F],
        sink: Sink[F],
        *,
        what: str,
        selector: str = "",
        field_selector: str = "",
        cut_managed_fields: bool = True,
        watch_timeout_s: int = WATCH_TIMEOUT_S,
        ident: Callable[[Mapping[str, Any]], str] | None = None,
    ) -> None:
        # NB: the User-Agent names the watch ("operand pod watch" -> ocp-gpu/operand-pod-watch).
        self._api = ApiSession(login, f"ocp-gpu/{what.replace(' ', '-')}")
        self._path = path
        self._parse = parse
        self._sink = sink
        # For logs and the User-Agent: "operand pod watch", "node watch".
        self._what = what
        self._selector = selector
        self._field_selector = field_selector
        # NB: off for kinds whose JSON is not in a built-in kind's field order (custom resources,
        # ControllerRevisions: no `spec` after metadata): `without_managed_fields` is for those.
        self._decode: Callable[[bytes | bytearray], Any] = decode if cut_managed_fields else json.loads
        self._watch_timeout_s = watch_timeout_s
        # What `gone` is told: the object's name, or (a namespaced kind watched in every
        # namespace) whatever its records are keyed by, as `ident` makes it from the body.
        self._ident = ident or _object_name
        # The last resourceVersion seen; None: list (again) before watching.
        self.resource_version: str | None = None
        # Counters (tests and logs): complete listings, watch requests opened.
        self.lists = 0
        self.watches = 0

    async def run(self) -> None:
        failures = 0
        try:
            while True:
                try:
                    if self.resource_version is None:
                        await self._list()
                    started = asyncio.get_running_loop().time()
                    if await self._watch() or asyncio.get_running_loop().time() - started >= 1.0:
                        failures = 0
                        continue
                    # NB: ended at once with nothing in it: resuming at once could spin.
                    failures += 1
                    await asyncio.sleep(watch_resumption.retry_delay(failures))
                except StatusError as error:
                    step = watch_resumption.step_for_status(error.status)
                    if step is Step.RELIST:
                        logger.info("%s: %s; listing again", self._what, error)
                        self.resource_version = None
                        continue
                    failures += 1
                    if step is Step.RENEW:
                        await self._api.renew()
                    self._log_failure(failures, error)
                    await asyncio.sleep(watch_resumption.retry_delay(failures))
                except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
                    # Refused, reset or timed out (an API server restarting), or a torn line.
                    failures += 1
                    self._log_failure(failures, error)
                    await asyncio.sleep(watch_resumption.retry_delay(failures))
                except Exception:
                    # NB: a bug of ours on an odd object must not end the watch (the operator
                    # would stop with it); it is logged, and a fresh listing starts over.
                    failures += 1
                    logger.exception("%s failed; listing again", self._what)
                    self.resource_version = None
                    await asyncio.sleep(watch_resumption.retry_delay(failures))
        finally:
            await self._api.close()

    def _log_failure(self, failures: int, error: BaseException) -> None:
        # NB: once per streak at WARNING; an API server restart costs a few quiet retries.
        log = logger.warning if failures == 1 else logger.debug
        log("%s: %s: %s; retrying", self._what, type(error).__name__, error)

    def _query(self, *pairs: tuple[str, str]) -> list[tuple[str, str]]:
        selected = [("labelSelector", self._selector)] if self._selector else []
        if self._field_selector:
            selected.append(("fieldSelector", self._field_selector))
        return [*selected, *pairs]

    async def _list(self) -> None:
        """Every object, page by page; the list's resourceVersion is where the watch starts."""
        session = self._api.http()
        facts: list[F] = []
        token = ""
        while True:
            query = self._query(("limit", str(LIST_PAGE)))
            if token:
                query.append(("continue", token))
            timeout = aiohttp.ClientTimeout(total=LIST_TIMEOUT_S, sock_connect=CONNECT_TIMEOUT_S)
            async with session.get(self._api.server + self._path, params=query, timeout=timeout) as response:
                raw = await response.read()
                if response.status != 200:
                    raise StatusError(response.status, raw.decode(errors="replace"))
            page = self._decode(raw)
            del raw
            facts.extend(self._parse(item) for item in page.get("items") or ())
            metadata = page.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                # NB: every page of a paged list carries the first page's resourceVersion.
                version = str(metadata.get("resourceVersion") or "")
                break
        self.lists += 1
        self._sink.listed(facts)
        self.resource_version = version

    async def _watch(self) -> int:
        """One WATCH request, resumed from `resource_version`, until the server ends it; the events seen."""
        session = self._api.http()
        query = self._query(
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._watch_timeout_s)),
            ("resourceVersion", self.resource_version or ""),
        )
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=self._watch_timeout_s + INACTIVITY_MARGIN_S
        )
        self.watches += 1
        async with session.get(self._api.server + self._path, params=query, timeout=timeout) as response:
            if response.status != 200:
                raise StatusError(response.status, (await response.read()).decode(errors="replace"))
            seen = 0
            async for event in event_lines(response.content, self._decode):
                self._apply(event)
                seen += 1
        return seen

    def _apply(self, event: Mapping[str, Any]) -> None:
        step = watch_resumption.step_for_event(event)
        body = event.get("object") or {}
        if step in (Step.RELIST, Step.RENEW, Step.RETRY):
            raise StatusError(int(body.get("code") or 0), str(body.get("message") or event))
        if step is Step.SKIP:
            return
        if step is Step.KEEP:
            self._sink.seen(self._parse(body))
        elif step is Step.FORGET:
            self._sink.gone(self._ident(body))
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)


def _object_name(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name") or "")


async def event_lines(
    content: aiohttp.StreamReader, decode_line: Callable[[bytes | bytearray], Any] = decode
) -> AsyncIterator[dict[str, Any]]:
    """The decoded JSON lines of a watch response, as they arrive.

    NB: not `StreamReader.readline`: it refuses a line beyond its buffer limit, and a pod
    with large annotations or many containers can exceed it.
    """
    pending = bytearray()
    async for chunk in content.iter_any():
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            if end > start:
                yield decode_line(pending[start:end])
            start = end + 1
        del pending[:start]
