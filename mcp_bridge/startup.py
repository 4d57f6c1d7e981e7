"""Serving before Django: a stdio ``mcpserve`` answers ``initialize`` and ``tools/list`` while
Django and the engine load.

An agent's client starts its servers and waits for their tool lists; the first tool call comes
later, once the model has read them. So the tool modules import only what declares the tools
(names, parameters, answer models), nothing that needs Django's app registry, and everything
the calls need is loaded after the server is up, as the database thread's first work item:
``django.setup()``, the migration check, the claim of the agent and the modules the tools
import in their bodies (``Toolset.engine_modules``). The thread runs its work in
order, so every call's database work comes after that item; ``StartupGate`` holds each tool
call until the item is done, because the tools' bodies import the engine too.

A server whose toolsets need the database to list their tools (one tool per published
workflow) or import models where they declare them (the tracker, the agents), whose
instructions read the project (``--generation 0.14``), or that serves over HTTP starts the old
way: Django first (``needs_django_first``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware

from workflows.errors import sentence

logger = logging.getLogger("deepwork.mcpserve")

SETTING_UP_MESSAGE = (
    "The deepwork server is setting up its database (a first start, or a new version); this "
    "call is answered when it is ready."
)
SET_UP_MESSAGE = (
    "The deepwork server set its database up in {seconds:.1f} s (a first start, or a new version)."
)

# Toolsets whose tools are listed without the database.
LISTED_WITHOUT_DATABASE = frozenset({"deepwork", "deepreview"})


def needs_django_first(*, toolsets: Sequence[str], generation: str, transport: str) -> bool:
    """Whether this server must load Django before it can answer ``tools/list``."""
    return (
        transport != "stdio"
        or generation == "0.14"
        or not LISTED_WITHOUT_DATABASE.issuperset(toolsets)
    )


def configure_logging() -> None:
    """The settings' logging (stderr), for what the server logs before ``django.setup()``
    applies it again: without it, Python's last-resort handler would print bare messages."""
    import logging.config

    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


def django_setup() -> None:
    """``django.setup()``: the settings, logging and the app registry (idempotent)."""
    import django

    django.setup()


def load_modules(names: Iterable[str]) -> None:
    """Import ``names`` (after ``django_setup``): what the served tools import in their
    bodies, loaded before the first call needs it."""
    for name in names:
        # The import statement's own path, not importlib.import_module: only that one is
        # timed by ``python -X importtime``, which is how this start-up gets profiled.
        __import__(name)


class StartupGate(Middleware):
    """Starts the server in the background (``start``, run by ``submit``: the database thread)
    and holds every tool call until that is done; then takes itself off the server, so that
    from then on a call pays nothing for it.

    A failed start-up is logged with its traceback; the calls waiting for it are refused with
    the reason, and the next call starts it again (a database that was down may be back).
    """

    def __init__(
        self,
        server: Any,
        *,
        start: Callable[[], None],
        submit: Callable[[Callable[[], None]], Future[None]],
    ) -> None:
        self._server = server
        self._start = start
        self._submit = submit
        self._started = self._begin()

    def _begin(self) -> Future[None]:
        def logged() -> None:
            try:
                self._start()
            except Exception:
                logger.exception("The server could not start; the next tool call tries again")
                raise

        return self._submit(logged)

    async def __call__(self, context: Any, call_next: Callable[[Any], Any]) -> Any:
        if context.method == "tools/call":
            await self.wait(tell=context.fastmcp_context)
        return await call_next(context)

    async def wait(self, tell: Any = None) -> None:
        """Wait for the start-up; while it sets the database up, say so once to the client
        through ``tell`` (the call's FastMCP context: a log message at the level it asked for)."""
        if self._started.done() and self._started.exception() is not None:
            self._started = self._begin()
        started = asyncio.wrap_future(self._started)
        try:
            if tell is not None:
                await self._tell_while_setting_up(started, tell)
            await started
        except Exception as exc:
            raise ToolError(
                f"The deepwork server could not start: {sentence(str(exc))} Its log (stderr) has "
                "the details; the next call tries again."
            ) from None
        if self in self._server.middleware:
            self._server.middleware.remove(self)

    @staticmethod
    async def _tell_while_setting_up(started: asyncio.Future[None], tell: Any) -> None:
        from mcp_bridge import migrate

        if started.done():
            return  # this call did not wait
        told = False
        while not started.done() and not told:
            if migrate.SETTING_UP.is_set():
                told = await _tell(tell, SETTING_UP_MESSAGE)
            else:
                await asyncio.wait({started}, timeout=0.1)
        await asyncio.wait({started})
        # A set-up quicker than a look every tenth of a second is still said, once it is done.
        if not told and migrate.set_up_seconds is not None:
            await _tell(tell, SET_UP_MESSAGE.format(seconds=migrate.set_up_seconds))


async def _tell(tell: Any, message: str) -> bool:
    # The client learns why its first call waited; a client gone meanwhile, or one that
    # cannot take log messages, is no reason to fail the call.
    with contextlib.suppress(Exception):
        await tell.info(message, logger_name="deepwork")
    return True
