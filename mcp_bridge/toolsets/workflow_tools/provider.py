"""The workflow tools' provider: one MCP tool per published workflow, and the runs they start.

The workflow tools come from a FastMCP ``Provider`` that asks its sources on every listing, so
the list follows the catalog with no restart: a job.yml edited, added or removed shows on the
next ``tools/list``; a remote source's list is re-fetched by a background poller (with backoff
while it is down; the last good list keeps being served). Each tool's arguments are validated
here against its schema (FastMCP does not validate a hand-written one).

Clients on the handshake protocol era get ``notifications/tools/list_changed`` when the set
of tools changes (a watcher compares it every few seconds); clients on the 2026-07-28 era,
which only get such pushes on a stream they opted into, are told to keep a listing for a few
seconds only (the server's ``cache_ttl``).
"""

from __future__ import annotations

import asyncio
import logging
import operator
import time
import weakref
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_context
from fastmcp.server.providers import Provider
from fastmcp.tools import Tool
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.versions import VersionSpec
from mcp_types.methods import serialize_server_result

from mcp_bridge.runner import LOOSE_OBJECT, client_connection
from mcp_bridge.state import ServerState, log_call
from mcp_bridge.toolsets.calls import refusal_error
from mcp_bridge.toolsets.workflow_tools.runs import source_call
from mcp_bridge.toolsets.workflow_tools.settings import (
    EXCLUDE_ENV,
    INCLUDE_ENV,
    MANY_WORKFLOW_TOOLS,
    Settings,
)
from mcp_bridge.toolsets.workflow_tools.tools import (
    WorkflowTool,
    describe,
    workflow_hints,
    workflow_meta,
)
from workflow_tools.models import workflow_key
from workflow_tools.selectors import (
    DEEPWORK_SOURCE_KEY,
    FILTERS_FILE,
    FileFilters,
    filters_pass,
    workflow_tool_filters,
)
from workflow_tools.services import workflow_tool_names_assign
from workflow_tools.sources import TERMINAL, PublishedWorkflow, SourceError, WorkflowSource
from workflows.db import BUSY_MESSAGE, DatabaseBusy, db_sync_to_async, retrying_when_busy
from workflows.errors import WorkflowError

logger = logging.getLogger("deepwork.workflow_tools")


# Set while a tools/list request is answered by ListingMiddleware: FastMCP then lists the
# static tools only, and the workflow tools' entries are added to its answer.
LISTED_BESIDE: ContextVar[bool] = ContextVar("workflow_tools_listed_beside", default=False)


@dataclass
class _Built:
    """The tools of one source, built from one list of its workflows."""

    listing: Sequence[PublishedWorkflow]
    tools: list[tuple[str, PublishedWorkflow, WorkflowTool]]


@dataclass
class Snapshot:
    tools: list[WorkflowTool]
    by_name: dict[str, WorkflowTool]
    fingerprints: dict[str, str] = field(default_factory=dict)
    # The tools' tools/list entries per protocol version: a snapshot lives as long as the
    # catalog, the filters and the names stay as they are, so this is made once per change.
    wire: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _names_key: int | None = None

    def names_key(self) -> int:
        """A checksum of the tools' names in order (for pagination cursors)."""
        if self._names_key is None:
            text = "\n".join(wf_tool.name for wf_tool in self.tools)
            self._names_key = zlib.crc32(text.encode())
        return self._names_key


def wire_entry(wf_tool: WorkflowTool) -> dict[str, Any]:
    """A workflow tool as tools/list shows it: name, title, description, input schema, what
    a call may do (its annotations, which clients decide approval by) and where it comes from.
    No output schema (any object, which says nothing) and no FastMCP tags: a thousand of them
    are a good part of what a client must parse."""
    workflow = wf_tool._workflow
    assert wf_tool.annotations is not None  # every workflow tool is made with them
    return {
        "name": wf_tool.name,
        "title": workflow.name[:200],
        "description": wf_tool.description,
        "inputSchema": wf_tool.parameters,
        "annotations": wf_tool.annotations.model_dump(by_alias=True, exclude_none=True),
        "_meta": workflow_meta(workflow, wf_tool._source),
    }


def wire_tools(snapshot: Snapshot, version: str) -> list[dict[str, Any]]:
    """The snapshot's tools/list entries for a client on ``version``.

    FastMCP would turn each tool into an SDK model, dump it and the SDK would validate and
    dump it again, on every listing: for a thousand tools that is most of a listing's time.
    Here each tool goes through the SDK's own check for ``version`` once, the first time a
    snapshot holding it is listed, and its entry is reused until the tool changes."""
    cached = snapshot.wire.get(version)
    if cached is not None:
        return cached
    fresh = [wf_tool for wf_tool in snapshot.tools if version not in wf_tool._wire]
    if fresh:
        # The envelope a 2026-07-28 answer needs; only the tools are kept.
        envelope = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
        checked = serialize_server_result(
            "tools/list",
            version,
            {**envelope, "tools": [wire_entry(wf_tool) for wf_tool in fresh]},
        )["tools"]
        for wf_tool, entry in zip(fresh, checked, strict=True):
            wf_tool._wire[version] = entry
    cached = snapshot.wire[version] = [wf_tool._wire[version] for wf_tool in snapshot.tools]
    return cached


class WorkflowToolsProvider(Provider):
    """One tool per published workflow of ``sources``, named once and for good."""

    def __init__(
        self,
        state: ServerState,
        sources: Sequence[WorkflowSource],
        *,
        reserved: frozenset[str],
        settings: Settings,
    ) -> None:
        super().__init__()
        self.state = state
        self.sources = list(sources)
        self.reserved = reserved
        self.settings = settings
        self._names: dict[str, str] = {}
        self._built: dict[str, _Built] = {}
        self._fingerprints: dict[str, dict[str, str]] = {}
        self._filtered: tuple[Any, Snapshot] | None = None
        # What the watcher last announced, and what the client last saw (refresh reports
        # the difference from it).
        self._announced: dict[str, str] | None = None
        self._seen: dict[str, str] | None = None
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._watcher: asyncio.Task[None] | None = None
        self._file_filters = FileFilters(state.project_root / FILTERS_FILE)
        # The names of the last list warned about as too long (see ``_warn_if_long``).
        self._warned_long: frozenset[str] | None = None

    def __repr__(self) -> str:
        return f"WorkflowToolsProvider({[source.label for source in self.sources]})"

    # --- listing

    def source_for(self, run_id: str) -> tuple[WorkflowSource, str]:
        """The source a run id belongs to, and the id its source knows it by."""
        prefix, sep, rest = run_id.partition(":")
        if sep:
            for source in self.sources:
                if source.key == prefix and source.key != DEEPWORK_SOURCE_KEY:
                    return source, rest
            raise ToolError(f"Unknown run id '{run_id}': no configured source is named {prefix!r}")
        for source in self.sources:
            if source.key == DEEPWORK_SOURCE_KEY:
                return source, run_id
        raise ToolError(f"Unknown run id '{run_id}'")

    @staticmethod
    def public_run_id(source: WorkflowSource, run_id: str) -> str:
        return run_id if source.key == DEEPWORK_SOURCE_KEY else f"{source.key}:{run_id}"

    def _build(self) -> Snapshot:
        """The tools as the sources list them now (in the database thread)."""
        if not self.settings.enabled:
            return Snapshot([], {})
        listings: list[tuple[WorkflowSource, Sequence[PublishedWorkflow]]] = []
        for source in self.sources:
            try:
                listings.append((source, source.workflows()))
            except WorkflowError as exc:
                logger.warning("%s cannot be listed: %s", source.label, exc)
                built = self._built.get(source.key)
                listings.append((source, built.listing if built else ()))
        missing = [
            (workflow_key(source.key, wf.id), wf)
            for source, listing in listings
            if (built := self._built.get(source.key)) is None or built.listing is not listing
            for wf in listing
            if workflow_key(source.key, wf.id) not in self._names
        ]
        if missing:
            self._names = workflow_tool_names_assign(
                project=self.state.project(), wanted=missing, reserved=self.reserved
            )
        for source, listing in listings:
            built = self._built.get(source.key)
            if built is None or built.listing is not listing:
                self._built[source.key] = self._make(source, listing)
        # The admin's rules, the environment's and the project file's, all applying at once.
        rules = workflow_tool_filters() + self.settings.env_rules + self._file_filters.rules()
        # The listings themselves, compared by identity (an id() of a freed list could be
        # reused by its successor).
        current = tuple(self._built[s.key].listing for s in self.sources)
        if self._filtered is not None:
            (old_rules, old_listings), cached = self._filtered
            if old_rules == rules and all(map(operator.is_, old_listings, current)):
                return cached
        tools: list[WorkflowTool] = []
        by_name: dict[str, WorkflowTool] = {}
        fingerprints: dict[str, str] = {}
        for source in self.sources:
            prints = self._fingerprints.get(source.key, {})
            for name, workflow, wf_tool in self._built[source.key].tools:
                if name in by_name:
                    logger.warning(
                        "%s: tool name %s is served already; skipped", source.label, name
                    )
                    continue
                if not filters_pass(rules, tool_name=name, workflow=workflow):
                    continue
                tools.append(wf_tool)
                by_name[name] = wf_tool
                fingerprints[name] = prints[name]
        snapshot = Snapshot(tools, by_name, fingerprints)
        self._filtered = ((rules, current), snapshot)
        self._warn_if_long(snapshot)
        return snapshot

    def _warn_if_long(self, snapshot: Snapshot) -> None:
        """Log once per change of a long list (not on every listing of it) that it is long,
        and the two tools that reach every workflow instead."""
        names = frozenset(snapshot.by_name)
        if len(names) <= MANY_WORKFLOW_TOOLS:
            self._warned_long = None
            return
        if names == self._warned_long:
            return
        self._warned_long = names
        logger.warning(
            "%d workflow tools are listed, more than %d: a client that loads every tool's "
            "schema spends its context on them, and models pick tools less well among many. "
            "Narrow them with include/exclude rules (the admin's workflow tool filters, "
            "%s/%s, or %s), or serve the deepwork toolset alone: its get_workflows and "
            "start_workflow reach every workflow with two tools.",
            len(names),
            MANY_WORKFLOW_TOOLS,
            INCLUDE_ENV,
            EXCLUDE_ENV,
            FILTERS_FILE,
        )

    def _make(self, source: WorkflowSource, listing: Sequence[PublishedWorkflow]) -> _Built:
        old_prints = self._fingerprints.get(source.key, {})
        old = self._built.get(source.key)
        previous = {
            name: (old_prints[name], wf_tool) for name, _, wf_tool in (old.tools if old else [])
        }
        tools: list[tuple[str, PublishedWorkflow, WorkflowTool]] = []
        prints: dict[str, str] = {}
        for workflow in listing:
            name = self._names[workflow_key(source.key, workflow.id)]
            if name in self.reserved:
                logger.warning("Workflow %s would shadow the tool %s; skipped", workflow.id, name)
                continue
            fingerprint = workflow.fingerprint()
            kept = previous.get(name)
            if kept is not None and kept[0] == fingerprint:
                wf_tool = kept[1]
            else:
                wf_tool = WorkflowTool(
                    name=name,
                    description=describe(workflow, source, self.settings.run_timeout),
                    parameters=dict(workflow.input_schema),
                    output_schema=LOOSE_OBJECT,
                    annotations=workflow_hints(workflow, source),
                    meta=workflow_meta(workflow, source),
                )
                wf_tool._workflow = workflow
                wf_tool._source = source
                wf_tool._runner = self._run
            tools.append((name, workflow, wf_tool))
            prints[name] = fingerprint
        self._fingerprints[source.key] = prints
        return _Built(listing, tools)

    async def snapshot(self) -> Snapshot:
        try:
            snapshot = await db_sync_to_async(retrying_when_busy(self._build))()
        except DatabaseBusy:
            if self._filtered is None:
                raise
            logger.warning("Database busy while listing workflow tools; serving the last list")
            snapshot = self._filtered[1]
        await self._announce(snapshot.fingerprints)
        return snapshot

    def _remember_session(self) -> None:
        """Keep the calling session of a handshake-era client, to push list changes to it."""
        with suppress(RuntimeError, LookupError):
            connection = client_connection(get_context())
            if connection is not None:
                self._sessions.add(connection)

    async def _list_tools(self) -> Sequence[Tool]:
        self._remember_session()
        if LISTED_BESIDE.get():
            return []  # ListingMiddleware adds their ready-made entries itself
        snapshot = await self.snapshot()
        self._seen = snapshot.fingerprints
        return snapshot.tools

    async def _get_tool(self, name: str, version: VersionSpec | None = None) -> Tool | None:
        if not name.startswith("workflow_") and self._filtered is not None:
            # A static tool's name: no workflow tool is ever named so.
            return None
        return (await self.snapshot()).by_name.get(name)

    # --- changes

    def diff(
        self, before: Mapping[str, str] | None, after: Mapping[str, str]
    ) -> dict[str, list[str]]:
        before = before or {}
        return {
            "added": sorted(set(after) - set(before)),
            "updated": sorted(n for n in after if n in before and before[n] != after[n]),
            "removed": sorted(set(before) - set(after)),
            "unchanged": sorted(n for n in after if before.get(n) == after[n]),
        }

    async def _announce(self, fingerprints: dict[str, str]) -> None:
        previous, self._announced = self._announced, fingerprints
        if previous is None or previous == fingerprints:
            return
        logger.info("Workflow tools changed: %s", self.diff(previous, fingerprints))
        for session in list(self._sessions):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client gone away must not stop the others
                logger.info("Could not send tools/list_changed: %s", exc)
                self._sessions.discard(session)

    async def refresh(self) -> dict[str, Any]:
        """Re-fetch every source now and say what changed since the client last looked, and
        which sources could not be read (their last good list stays served)."""
        for source in self.sources:
            await asyncio.to_thread(source.refresh, force=True)
        before = self._seen if self._seen is not None else self._announced
        snapshot = await self.snapshot()
        self._seen = snapshot.fingerprints
        unavailable = [
            error for source in self.sources if (error := getattr(source, "last_error", None))
        ]
        return {**self.diff(before, snapshot.fingerprints), "unavailable": unavailable}

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        self._watcher = asyncio.create_task(self._watch(), name="workflow-tools-watcher")
        try:
            yield
        finally:
            self._watcher.cancel()
            with suppress(asyncio.CancelledError):
                await self._watcher

    async def _watch(self) -> None:
        """Poll remote sources (as due) and the catalog; announce changes."""
        while True:
            try:
                for source in self.sources:
                    if not source.local:  # a network source fetches when due (backoff)
                        await asyncio.to_thread(source.refresh, force=False)
                # Only connections that can be told need the watcher to look.
                if self.settings.enabled and self._sessions:
                    await self.snapshot()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Watching the workflow tools failed; trying again")
            await asyncio.sleep(self.settings.poll_seconds)

    # --- running

    async def _run(self, wf_tool: WorkflowTool, arguments: dict[str, Any]) -> ToolResult:
        self._remember_session()
        source, workflow = wf_tool._source, wf_tool._workflow
        state = self.state
        params = {"workflow_id": workflow.id}
        try:
            agent_id = (await db_sync_to_async(state.agent)()).agent_id
            started = await source_call(
                source,
                lambda: source.start(workflow=workflow, arguments=arguments, agent_id=agent_id),
            )
        except WorkflowError as exc:
            log_call(state, wf_tool.name, params)
            raise refusal_error(f"Error calling tool '{wf_tool.name}': {exc}") from None
        except DatabaseBusy:
            log_call(state, wf_tool.name, params)
            raise ToolError(f"Error calling tool '{wf_tool.name}': {BUSY_MESSAGE}") from None
        except SourceError as exc:
            log_call(state, wf_tool.name, params)
            raise ToolError(f"Workflow {workflow.id} could not be started: {exc}") from None
        log_call(state, wf_tool.name, params, getattr(started.result, "stack", None))
        if started.answer is not None:
            return ToolResult(structured_content=dict(started.answer))
        run_id = self.public_run_id(source, started.run_id)
        if workflow.execution_type == "async" or started.status in TERMINAL:
            return ToolResult(
                structured_content={
                    "run_id": run_id,
                    "workflow_id": workflow.id,
                    "status": started.status,
                    "result": started.result,
                }
            )
        return await self._follow(source, workflow, run_id, started.run_id)

    async def _follow(
        self, source: WorkflowSource, workflow: PublishedWorkflow, run_id: str, remote_id: str
    ) -> ToolResult:
        """Wait for a sync run, with progress notifications, up to the timeout."""
        ctx = get_context()
        deadline = time.monotonic() + self.settings.run_timeout
        pause = 0.2
        try:
            while True:
                status = await source_call(source, lambda: source.status(run_id=remote_id))
                progress = status.progress or {}
                done, total = progress.get("completed_steps"), progress.get("total_steps")
                if isinstance(done, int | float) and isinstance(total, int | float):
                    await ctx.report_progress(done, total, f"{workflow.id}: {status.status}")
                if status.status in TERMINAL:
                    break
                if time.monotonic() >= deadline:
                    raise TimeoutError
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 2.0)
        except TimeoutError:
            if source.cancel_on_timeout:
                outcome = await self._cancel_quietly(source, remote_id, "timed out")
            else:
                outcome = (
                    "it keeps running: follow it with get_workflow_status, or stop it with "
                    "cancel_workflow_run"
                )
            raise ToolError(
                f"Workflow {workflow.id} (run {run_id}) did not finish within "
                f"{self.settings.run_timeout:g} s; {outcome}"
            ) from None
        except asyncio.CancelledError:
            if source.cancel_on_timeout:
                await asyncio.shield(
                    self._cancel_quietly(source, remote_id, "the call was cancelled")
                )
            raise
        except (SourceError, WorkflowError) as exc:
            raise ToolError(f"Workflow {workflow.id} (run {run_id}): {exc}") from None
        except DatabaseBusy:
            raise ToolError(f"Workflow {workflow.id} (run {run_id}): {BUSY_MESSAGE}") from None
        wire = {**status.wire(), "run_id": run_id}
        if status.status != "COMPLETED":
            raise ToolError(
                f"Workflow {workflow.id} (run {run_id}) {status.status.lower()}: "
                f"{status.error or 'no details given'}"
            )
        return ToolResult(structured_content=wire)

    async def _cancel_quietly(self, source: WorkflowSource, remote_id: str, why: str) -> str:
        try:
            await source_call(source, lambda: source.cancel(run_id=remote_id, reason=why))
        except (SourceError, WorkflowError, DatabaseBusy) as exc:
            return f"cancelling it at its source failed: {exc}"
        return "it was cancelled at its source"
