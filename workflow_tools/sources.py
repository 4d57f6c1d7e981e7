"""Workflow sources: where the workflows served as MCP tools come from, and how a run
of one is started, watched and cancelled.

A *source* lists its published workflows in one list schema (``PublishedWorkflow``:
``id``, ``name``, ``description``, ``category``, ``version``, ``inputSchema``,
``executionType``, ``metadata``) and runs them (``start``, ``status``, ``cancel``). Every kind
of workflow plugs in through ``WorkflowSource``: DeepWork job workflows of a project
(``workflow_tools.deepwork_source.DeepWorkSource``), its defined multi-agent DAG workflows
(``workflow_tools.dag_source.DagSource``) and another server's REST list (``RemoteSource`` here).

Everything that arrives from outside is checked here, entry by entry: a definition that
breaks a rule is skipped with a logged reason naming the entry and the rule, and never takes
the others down with it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from jsonschema.exceptions import ValidationError

from workflow_tools import outbound
from workflows import json_schemas

logger = logging.getLogger("deepwork.workflow_tools")

ExecutionType = Literal["sync", "async"]
RunState = Literal["RUNNING", "COMPLETED", "FAILED", "CANCELLED"]
TERMINAL: frozenset[str] = frozenset({"COMPLETED", "FAILED", "CANCELLED"})

# A workflow without a usable schema takes any object: it is still served, and the
# problem is logged.
GENERIC_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}

# Bounds on what one source may hand us. A list past MAX_WORKFLOWS keeps its first entries.
MAX_WORKFLOWS = 1000
MAX_ID_CHARS = 255
MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 8000
MAX_SHORT_CHARS = 64  # category, version
MAX_SCHEMA_BYTES = 64 * 1024
MAX_METADATA_BYTES = 16 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True)
class PublishedWorkflow:
    """One workflow as a source publishes it, checked. ``input_schema`` is always usable."""

    id: str
    name: str
    description: str
    category: str = "workflow"
    version: str = "1.0.0"
    input_schema: Mapping[str, Any] = field(default_factory=lambda: GENERIC_SCHEMA)
    execution_type: ExecutionType = "async"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """The entry of the published-workflows list."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "category": self.category,
            "version": self.version,
            "inputSchema": dict(self.input_schema),
            "executionType": self.execution_type,
            "metadata": dict(self.metadata),
        }

    def fingerprint(self) -> str:
        """Changes whenever anything a client sees of the tool would."""
        text = json.dumps(self.wire(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class RunStarted:
    """A run begun at its source. ``result`` is what the start answered (for a DeepWork
    workflow: the first step, as ``start_workflow`` answers). ``answer``, when set, is the
    tool's whole answer as the source's own dialect words it (a DeepWork workflow's tool
    answers exactly as ``start_workflow``); otherwise the tool answers ``{run_id,
    workflow_id, status, result}`` and follows a ``sync`` run to its end."""

    run_id: str
    workflow_id: str
    status: RunState
    result: Any = None
    answer: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RunStatus:
    run_id: str
    workflow_id: str
    status: RunState
    progress: Mapping[str, Any] | None = None
    result: Any = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None

    def wire(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "status": self.status,
            "progress": dict(self.progress) if self.progress is not None else None,
            "result": self.result,
            "error": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


class SourceError(Exception):
    """A source refused or could not be reached; the message says which and why."""


class SourceUnavailable(SourceError):
    """The source could not be reached or answered garbage (retry later)."""


class NotSupported(SourceError):
    """The source cannot do this for its workflows (say, a remote that cannot cancel a run)."""


class UnknownRun(SourceError):
    pass


class WorkflowSource(Protocol):
    """Where published workflows come from. ``key`` is stable for the source: it prefixes the
    keys of its workflows' persisted tool names and the run ids its tools hand out
    (``<key>:<run id>``; the DeepWork source's run ids, session ids, go bare). ``label`` names
    it in messages. ``local`` sources read and write this server's database: their calls run
    in the database thread (retried while it is busy); the others run in a worker thread.

    ``workflows`` answers from what the source last knew and never blocks on a network: a
    source that fetches does so in ``refresh``. All calls are sync; ``start``, ``status`` and
    ``cancel`` raise ``SourceError`` subclasses or ``workflows.errors.WorkflowError``.
    ``agent_id`` is the calling agent; ``cancel``'s ``by`` the person cancelling, if any.
    ``cancel_on_timeout``: whether a ``sync`` run that outlasts the caller's wait (or whose
    call is cancelled) is cancelled at the source, or keeps running.
    """

    key: str
    label: str
    local: bool
    cancel_on_timeout: bool

    def workflows(self) -> Sequence[PublishedWorkflow]: ...

    def refresh(self, *, force: bool) -> None: ...

    def start(
        self, *, workflow: PublishedWorkflow, arguments: Mapping[str, Any], agent_id: str
    ) -> RunStarted: ...

    def status(self, *, run_id: str) -> RunStatus: ...

    def cancel(self, *, run_id: str, reason: str, by: Any = None, via: str = "") -> RunStatus: ...


# --- Checking definitions from outside -------------------------------------------------------


class _Skip(Exception):
    pass


def _text(item: Mapping[str, Any], key: str, limit: int, *, default: str | None = None) -> str:
    value = item.get(key, default)
    if value is None:
        raise _Skip(f"'{key}' is missing")
    if not isinstance(value, str):
        raise _Skip(f"'{key}' must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise _Skip(f"'{key}' is {len(value):,} characters; the limit is {limit:,}")
    if key != "description" and _CONTROL.search(value):
        raise _Skip(f"'{key}' holds a control character")
    if key in ("id", "name") and not value.strip():
        raise _Skip(f"'{key}' is empty")
    return value


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def usable_schema(schema: Any, where: str) -> Mapping[str, Any]:
    """``schema`` if it is a valid JSON Schema of an object, else the generic one (logged).

    Raises ``_Skip`` for a schema whose ``$ref`` leaves it, points nowhere or loops: taking
    any object instead would drop whatever that ref was meant to check.
    """
    if schema is None:
        return GENERIC_SCHEMA
    reason = None
    if not isinstance(schema, dict):
        reason = f"inputSchema must be an object, not {type(schema).__name__}"
    elif schema.get("type") != "object":
        reason = "inputSchema must have type 'object'"
    elif _json_size(schema) > MAX_SCHEMA_BYTES:
        reason = f"inputSchema is larger than {MAX_SCHEMA_BYTES:,} bytes"
    else:
        try:
            json_schemas.check(schema, dialect="declared")
        except json_schemas.SchemaProblem as exc:
            if exc.kind == "ref":
                raise _Skip(f"inputSchema: {exc.message}") from None
            if exc.kind == "depth":
                reason = "inputSchema nests too deeply"
            else:
                reason = f"inputSchema is not a valid JSON Schema: {exc.message}"
    if reason is None:
        return schema
    logger.warning("%s: %s; it takes any object instead", where, reason)
    return GENERIC_SCHEMA


def parse_published(payload: Any, *, label: str) -> list[PublishedWorkflow]:
    """The valid definitions of a list answer (a bare array or ``{"results": [...]}``);
    each invalid entry is skipped with a warning naming it and the rule it breaks.

    Raises ``SourceUnavailable`` when the answer is no list at all (the caller keeps the last
    good list).
    """
    items = payload.get("results") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise SourceUnavailable(
            f"{label} answered {type(payload).__name__}, not a list of workflows "
            "(a JSON array or an object with 'results')"
        )
    if len(items) > MAX_WORKFLOWS:
        logger.warning(
            "%s lists %d workflows; only the first %d are served",
            label,
            len(items),
            MAX_WORKFLOWS,
        )
        items = items[:MAX_WORKFLOWS]
    found: list[PublishedWorkflow] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"{label}: workflow #{index}"
        try:
            if not isinstance(item, dict):
                raise _Skip(f"an entry must be an object, not {type(item).__name__}")
            workflow_id = _text(item, "id", MAX_ID_CHARS)
            where = f"{label}: workflow {workflow_id!r}"
            if workflow_id in seen:
                raise _Skip("its id repeats an earlier entry's")
            name = _text(item, "name", MAX_NAME_CHARS)
            description = _text(item, "description", MAX_DESCRIPTION_CHARS)
            category = _text(item, "category", MAX_SHORT_CHARS, default="workflow")
            version = _text(item, "version", MAX_SHORT_CHARS, default="1.0.0")
            execution = item.get("executionType", "async")
            if execution not in ("sync", "async"):
                raise _Skip(f"'executionType' must be 'sync' or 'async', not {execution!r}")
            metadata = item.get("metadata", {})
            if metadata is None:
                metadata = {}
            if not isinstance(metadata, dict):
                raise _Skip(f"'metadata' must be an object, not {type(metadata).__name__}")
            if _json_size(metadata) > MAX_METADATA_BYTES:
                raise _Skip(f"'metadata' is larger than {MAX_METADATA_BYTES:,} bytes")
            input_schema = usable_schema(item.get("inputSchema"), where)
        except _Skip as exc:
            logger.warning("%s skipped: %s", where, exc)
            continue
        except RecursionError:
            logger.warning("%s skipped: it nests too deeply", where)
            continue
        seen.add(workflow_id)
        found.append(
            PublishedWorkflow(
                id=workflow_id,
                name=name,
                description=description,
                category=category,
                version=version,
                input_schema=input_schema,
                execution_type=execution,
                metadata=metadata,
            )
        )
    return found


def _path(error: ValidationError) -> str:
    return "$" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
    )


def input_validator(schema: Mapping[str, Any]) -> Any:
    """The validator of a published workflow's ``input_schema`` (its ``$schema`` dialect,
    2020-12 by default). Raises ``json_schemas.SchemaProblem`` for a schema no list check
    passed: a source's schema is checked by ``usable_schema``, the local ones are the
    server's own."""
    return json_schemas.validator(dict(schema), dialect="declared")


def arguments_problem(tool_name: str, validator: Any, arguments: Any) -> str | None:
    """``arguments_refusal`` of what ``arguments`` break, or None when they fit."""
    errors = json_schemas.all_errors(validator, arguments)
    return arguments_refusal(tool_name, errors) if errors else None


def arguments_refusal(tool_name: str, errors: Iterable[ValidationError]) -> str:
    """The error text of arguments that break the schema: each path and rule broken."""
    found = sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    shown = "; ".join(f"at {_path(e)}: {e.message} (rule '{e.validator}')" for e in found[:5])
    more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
    return f"Invalid arguments for {tool_name}: {shown}{more}"


# --- A remote source: another server's REST list -------------------------------------------


def source_key(url: str) -> str:
    """The stable key of the source at ``url`` (its tool names are kept under it)."""
    return "remote-" + hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:12]


@dataclass
class _Backoff:
    first: float
    most: float
    failures: int = 0
    next_at: float = 0.0

    def failed(self, now: float) -> float:
        self.failures += 1
        pause = min(self.most, self.first * 2 ** (self.failures - 1))
        self.next_at = now + pause
        return pause

    def succeeded(self) -> None:
        self.failures = 0
        self.next_at = 0.0


class RemoteSource:
    """The published workflows of another deepwork-server (or anything serving the
    published-workflows list) at ``url``: ``GET url`` lists, ``POST url/runs`` starts
    (``{"workflow_id", "input", "agent_id"}``), ``GET url/runs/<run>`` reports and
    ``POST url/runs/<run>/cancel`` cancels, each with ``Authorization: Bearer <token>``.

    The list is fetched by ``refresh`` only (a poller calls it); until the first success
    there are no remote tools, and after a failure the last good list stays served while
    retries back off (``retry_first`` doubling up to ``retry_most`` seconds).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 10.0,
        retry_first: float = 1.0,
        retry_most: float = 60.0,
        poll_seconds: float = 30.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.key = source_key(self.url)
        self.label = f"workflow source {outbound.shown(self.url)}"
        self.local = False
        self.cancel_on_timeout = True
        self.timeout = timeout
        self.poll_seconds = poll_seconds
        self._backoff = _Backoff(retry_first, retry_most)
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._workflows: tuple[PublishedWorkflow, ...] = ()
        self._fetched_at: float | None = None
        self.last_error: str | None = None

    # listing

    def workflows(self) -> Sequence[PublishedWorkflow]:
        with self._lock:
            return self._workflows

    def due(self, now: float) -> bool:
        with self._lock:
            if self._backoff.failures:
                return now >= self._backoff.next_at
            return self._fetched_at is None or now - self._fetched_at >= self.poll_seconds

    def refresh(self, *, force: bool) -> None:
        """Fetch the list if due (or ``force``); on failure keep the last good one."""
        with self._fetch_lock:
            now = time.monotonic()
            if not force and not self.due(now):
                return
            try:
                payload = self._request("GET", self.url)
                found = parse_published(payload, label=self.label)
            except SourceError as exc:
                with self._lock:
                    pause = self._backoff.failed(time.monotonic())
                    self.last_error = str(exc)
                    kept = len(self._workflows)
                logger.warning(
                    "%s; serving the last good list (%d workflows); next try in %.0f s",
                    exc,
                    kept,
                    pause,
                )
                return
            with self._lock:
                if self._backoff.failures:
                    logger.warning("%s is back: %d workflows", self.label, len(found))
                self._backoff.succeeded()
                self._workflows = tuple(found)
                self._fetched_at = time.monotonic()
                self.last_error = None

    # runs

    def start(
        self, *, workflow: PublishedWorkflow, arguments: Mapping[str, Any], agent_id: str
    ) -> RunStarted:
        answer = self._request(
            "POST",
            f"{self.url}/runs",
            {"workflow_id": workflow.id, "input": dict(arguments), "agent_id": agent_id},
        )
        if not isinstance(answer, dict) or not isinstance(answer.get("run_id"), str):
            raise SourceUnavailable(f"{self.label} answered a start without a run_id")
        return RunStarted(
            run_id=answer["run_id"],
            workflow_id=workflow.id,
            status=_state(answer.get("status"), self.label),
            result=answer.get("result"),
        )

    def status(self, *, run_id: str) -> RunStatus:
        return self._run_status(self._request("GET", self._run_url(run_id)), run_id)

    def cancel(self, *, run_id: str, reason: str, by: Any = None, via: str = "") -> RunStatus:
        answer = self._request("POST", self._run_url(run_id) + "/cancel", {"reason": reason})
        return self._run_status(answer, run_id)

    def _run_url(self, run_id: str) -> str:
        return f"{self.url}/runs/{urllib.parse.quote(run_id, safe='')}"

    def _run_status(self, answer: Any, run_id: str) -> RunStatus:
        if not isinstance(answer, dict):
            raise SourceUnavailable(f"{self.label} answered a run status that is no object")
        progress = answer.get("progress")
        error = answer.get("error")
        return RunStatus(
            run_id=run_id,
            workflow_id=str(answer.get("workflow_id", "")),
            status=_state(answer.get("status"), self.label),
            progress=progress if isinstance(progress, dict) else None,
            result=answer.get("result"),
            error=error if isinstance(error, str) else None,
            started_at=_opt_str(answer.get("started_at")),
            ended_at=_opt_str(answer.get("ended_at")),
        )

    def _request(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            answer = outbound.fetch(
                method,
                url,
                headers=headers,
                body=data,
                deadline=self.timeout,
                max_bytes=MAX_BODY_BYTES,
                label=self.label,
            )
        except outbound.OutboundError as exc:
            reason = _after_label(exc, self.label)
            raise SourceUnavailable(f"{self.label} is unavailable: {reason}") from None
        if answer.status >= 400:
            raise _http_error(answer.status, answer.body, self.label)
        try:
            return json.loads(answer.body)
        except (ValueError, RecursionError):
            raise SourceUnavailable(f"{self.label} answered something that is not JSON") from None


def _after_label(exc: outbound.OutboundError, label: str) -> str:
    """The reason alone: the message names the source already."""
    text = str(exc)
    return text[len(label) :].lstrip(" :") if text.startswith(label) else text


def _http_error(code: int, raw: bytes, label: str) -> SourceError:
    try:
        body = json.loads(raw[: 64 * 1024] or b"{}")
        # Ours is {"error": {"message": ...}}; others often answer {"message": ...}.
        inner = body.get("error") if isinstance(body, dict) else None
        found = inner if isinstance(inner, dict) else body
        message = found.get("message") if isinstance(found, dict) else None
        if not isinstance(message, str):
            message = None
    except (ValueError, RecursionError):
        message = None
    detail = f"{label} answered {code}" + (f": {message}" if message else "")
    if code == 404 and isinstance(message, str) and "run" in message.lower():
        return UnknownRun(message)
    if code in (404, 405, 501):
        return NotSupported(detail)
    if code in (400, 403, 409, 413, 422):
        return SourceError(detail)
    return SourceUnavailable(detail)


def _state(value: Any, label: str) -> RunState:
    if value in ("RUNNING", "COMPLETED", "FAILED", "CANCELLED"):
        return value
    raise SourceUnavailable(f"{label} answered an unknown run status {value!r}")


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
