"""Decisions are people's: every REST operation that records a person as the one who acted
(``by=`` a signed-in user, or a token's user) refuses MCP agents' tokens through its
``TokenAuth``, and so does every operation guarded by a decision's permission
(``api.auth.DECISIONS``) but those listed in ``AGENTS_TOO``, which also serve agents on their
own work, recorded as theirs. An agent's own calls record ``by=identity.person``, which is None
for an agent.

Read from the mounted API (each operation's auth) and from each operation's source (what it
passes as ``by``), so a new route is held to it without being listed here.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest
from ninja import Router

from accounts.people import signed_in_user
from api.api import api
from api.auth import DECIDE, DECISIONS, DRIVE, TokenAuth

# Operations with a decision's permission that agents' tokens may also call (``agents=True``),
# and why: another server's workflow source cancels the runs its own agents started.
AGENTS_TOO = {"cancel_published_run"}


def records_a_person(view: Callable[..., Any]) -> list[str]:
    """Where ``view`` passes a person as ``by``: anything but ``<identity>.person`` (None for
    an agent's token) or None."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(view)))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.keyword) or node.arg != "by":
            continue
        value = node.value
        if isinstance(value, ast.Constant) and value.value is None:
            continue
        if isinstance(value, ast.Attribute) and value.attr == "person":
            continue
        found.append(f"by={ast.unparse(value)} at line {node.lineno}")
    return found


def violations(routers: Iterable[tuple[str, Router]]) -> list[str]:
    found = []
    for prefix, router in routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                name = (
                    f"{'/'.join(operation.methods)} {prefix}{path} ({operation.view_func.__name__})"
                )
                auths = [a for a in operation.auth_callbacks if isinstance(a, TokenAuth)]
                if len(auths) != 1 or len(operation.auth_callbacks) != 1:
                    found.append(f"{name}: not behind exactly one TokenAuth")
                    continue
                auth = auths[0]
                if auth.decision is not None:
                    continue
                if auth.permission in DECISIONS and operation.view_func.__name__ not in AGENTS_TOO:
                    found.append(
                        f"{name}: needs '{auth.permission}', a decision's permission, but lets "
                        "agents' tokens through"
                    )
                for where in records_a_person(operation.view_func):
                    found.append(f"{name}: records a person ({where}) for agents' tokens too")
    return found


def test_every_decision_route_refuses_agents_tokens():
    assert violations(api._routers) == []


def test_every_decision_permission_is_guarded_on_the_mounted_api():
    guarded = {
        operation.view_func.__name__
        for _, router in api._routers
        for path_view in router.path_operations.values()
        for operation in path_view.operations
        for auth in operation.auth_callbacks
        if isinstance(auth, TokenAuth) and auth.decision is not None
    }
    assert guarded == {
        "abort_session",
        "override_review",
        "request_changes",
        "resolve_blocker",
        "complete_human_step",
        "fail_human_step",
        "add_project",
        "remove_project",
    }


def test_a_planted_unguarded_decision_is_found():
    planted = Router()

    @planted.post("/rule", auth=TokenAuth(DRIVE))
    def rule(request: HttpRequest) -> None:
        record(by=signed_in_user(request))

    @planted.post("/decide", auth=TokenAuth(DECIDE, agents=True))
    def decide(request: HttpRequest) -> None:
        record(by=None)

    @planted.post("/drive", auth=TokenAuth(DRIVE))
    def drive(request: HttpRequest) -> None:
        record(by=identity(request).person)

    @planted.post("/override", auth=TokenAuth(DECIDE))
    def override(request: HttpRequest) -> None:
        record(by=signed_in_user(request))

    assert violations([("/planted", planted)]) == [
        "POST /planted/rule (rule): records a person (by=signed_in_user(request) at line 3) "
        "for agents' tokens too",
        "POST /planted/decide (decide): needs 'reviews.decide_review', a decision's permission, "
        "but lets agents' tokens through",
    ]


def record(**kwargs: Any) -> None:
    """Stands for a service the planted operations call."""


def identity(request: HttpRequest) -> Any:
    """Stands for ``api.auth.caller``."""
