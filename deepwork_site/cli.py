"""The ``deepwork-server`` command, and ``manage.py`` in a clone: one entry point for both.

- ``deepwork-server mcp --path DIR [options]``: the stdio MCP server (``mcpserve``'s options);
- ``deepwork-server serve [--host H] [--port P]``: migrate, make the first admin once, and
  serve the dashboard, admin, REST API and ``/mcp`` with uvicorn;
- ``deepwork-server project add PATH``: serve a folder as a hosted project (prints its id);
  ``project list``; ``project remove PROJECT`` (served nowhere, its sessions kept);
- ``deepwork-server token create --user U [--mcp] [--project P] [--create-user]``;
- ``deepwork-server connect [--client C] [--url URL [--token T]]``: what to paste into a client;
- ``deepwork-server manage COMMAND ...``: any Django management command.

Everything but ``connect`` runs Django's management commands, so the command line and
``manage.py`` do the same work the same way. Django is imported only once the subcommand is
known: the MCP server must tell the settings to load its lean app registry first, and it sets
Django up itself (after answering ``tools/list``, where it can: ``mcp_bridge.startup``).
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import socket
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

from deepwork_site import process

PROG = "deepwork-server"
SETTINGS_MODULE = "deepwork_site.settings"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def _start_mcp() -> None:
    """Start-up of an MCP server: the lean app registry, no garbage collection yet, and
    pydantic models built when first used.

    Start-up allocates hundreds of thousands of long-lived objects (Django, FastMCP, pydantic);
    collecting while they pile up costs ~250 ms of an agent's wait for the server. mcpserve
    freezes them and turns collection back on before serving.

    Importing the MCP SDK defines some 500 protocol models, and pydantic builds each one's
    validator as it is defined, most of them for messages a server never sees; building them
    on first use instead takes 7-25% off the wait for ``tools/list`` and adds a few
    milliseconds to the first call. Pydantic's ``defer_build``, set on the base every model
    inherits its configuration from, before any model is defined; since pydantic 2.14 a model
    built on first use from two threads at once is built once, under a lock.
    """
    process.serve_mcp_only()
    gc.disable()
    from pydantic import BaseModel

    BaseModel.model_config["defer_build"] = True


def _django(argv: Sequence[str]) -> None:
    """Run the management command ``argv[1:]`` (``argv[0]`` names the program in messages)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    from django.core.management import execute_from_command_line

    execute_from_command_line(list(argv))


def _command(
    app: str, name: str, argv: Sequence[str], *, migrated: bool = False, setup: bool = True
) -> None:
    """Run the management command ``name`` of ``app`` with ``argv[2:]``; ``argv[:2]`` name it in
    its help and errors, e.g. ``deepwork-server mcp``. ``migrated``: bring the database up to
    date first, so that adding a project or a token is the first thing a fresh install can do.
    ``setup=False``: the command loads Django itself, when it needs it (``mcpserve``)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    import django
    from django.core.management import load_command_class

    if setup:
        django.setup()
    if migrated and not any(arg in ("-h", "--help") for arg in argv):
        from mcp_bridge.migrate import migrate_if_needed

        migrate_if_needed()
    load_command_class(app, name).run_from_argv(list(argv))


def manage(argv: Sequence[str] | None = None) -> None:
    """``manage.py``: Django's management utility, with the MCP server's lean start."""
    argv = list(sys.argv if argv is None else argv)
    if argv[1:2] == ["mcpserve"]:
        _start_mcp()
        _command("mcp_bridge", "mcpserve", argv, setup=False)
        return
    _django(argv)


def _port_taken(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be listened on, if it cannot: listening on it a moment, as
    uvicorn will (``SO_REUSEADDR``, so a port held only by closing connections counts as
    free)."""
    try:
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.create_server(address[:2], family=family):  # SO_REUSEADDR on POSIX
            pass
    except OSError as exc:
        return exc
    return None


def _serve(host: str, port: int) -> None:
    # Said before anything is migrated or made: the usual cause is a server already running.
    if (taken := _port_taken(host, port)) is not None:
        busy = taken.errno == errno.EADDRINUSE
        raise SystemExit(
            f"{PROG} serve: cannot listen on {host}:{port}: "
            + (
                f"the port is in use (another {PROG} serve?). Pick another with --port, e.g. "
                f"'{PROG} serve --port {port + 1}'"
                if busy
                else f"{taken.strerror or taken}. Check --host"
            )
        )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    import django
    import uvicorn
    from django.core.management import call_command

    django.setup()
    from mcp_bridge.migrate import migrate_if_needed, migration_lock

    # Under the lock every server takes to migrate, so that several started at once on a
    # fresh data folder migrate once, and make one first admin.
    migrate_if_needed()
    with migration_lock():
        call_command("ensure_admin")
    # The first admin's password must reach a log or a pipe before the server's own output.
    sys.stdout.flush()
    uvicorn.run("deepwork_site.asgi:application", host=host, port=port)


def _connect(client: str | None, url: str | None, token: str | None) -> None:
    """Print each client's files on stdout and nothing else, so that
    ``connect --client codex >> ~/.codex/config.toml`` works; where each goes, and the
    commands to run (the token's ``export``), are hints on stderr."""
    from deepwork_site import connect

    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SystemExit(f"{PROG} connect: --url must be an http(s) address, got {url!r}")
        if not parts.path.rstrip("/").endswith(connect.MCP_PATH):
            url = url.rstrip("/") + connect.MCP_PATH
        configs = connect.hosted_configs(url=url, token=token)
    else:
        configs = connect.stdio_configs()
    first = True
    for config in configs:
        if client is not None and config.key != client:
            continue
        for snippet in config.snippets:
            sys.stdout.flush()
            gap = "" if first else "\n"
            if snippet.is_file:
                sys.stderr.write(f"{gap}# {config.name}: {snippet.where}\n")
                sys.stderr.flush()
                sys.stdout.write(snippet.text)
            else:
                hint = "".join(f"#   {line}\n" for line in snippet.text.splitlines())
                sys.stderr.write(f"{gap}# {config.name}, run ({snippet.where}):\n{hint}")
                sys.stderr.flush()
            first = False
    sys.stdout.flush()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A workflow server for AI agents: MCP for agents, a dashboard for people.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {process.server_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "mcp",
        help="Serve MCP to one agent over stdio (--path DIR; '%(prog)s mcp --help' lists all).",
        add_help=False,
    )
    serve = commands.add_parser(
        "serve", help="Migrate, make the first admin once, serve the dashboard, API and /mcp."
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help="Address to listen on.")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="Port to listen on.")
    project = commands.add_parser("project", help="Projects this server serves.")
    project_actions = project.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = project_actions.add_parser(
        "add", help="Add (or host) a folder as a project; prints its id."
    )
    add.add_argument(
        "target", metavar="path", help="The project folder (the one holding .deepwork/jobs)."
    )
    project_actions.add_parser("list", help="List the projects: id, state, folder, name.")
    remove = project_actions.add_parser(
        "remove", help="Remove a project: served nowhere, its sessions kept (read-only)."
    )
    remove.add_argument("target", metavar="project", help="The project's id, or its folder.")
    commands.add_parser(
        "token",
        help="API and MCP tokens ('%(prog)s token create --user U --mcp'; --help for more).",
        add_help=False,
    )
    connect = commands.add_parser("connect", help="Print an MCP client's configuration.")
    connect.add_argument(
        "--client",
        choices=("claude-code", "codex", "cursor", "vscode"),
        help="Only this client (default: every one).",
    )
    connect.add_argument(
        "--url", help="A hosted server's address (its /mcp is added when missing)."
    )
    connect.add_argument(
        "--token",
        help="With --url: your MCP token, shown only in the hint that exports it (never in a "
        "file; the files read $DEEPWORK_MCP_TOKEN).",
    )
    commands.add_parser(
        "manage", help="Run a Django management command, e.g. 'manage migrate'.", add_help=False
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """The ``deepwork-server`` console command."""
    args = list(sys.argv[1:] if argv is None else argv)
    command, rest = (args[0], args[1:]) if args else (None, [])
    # These pass their arguments on to a management command, whose own parser checks them
    # and answers --help with every option it takes.
    if command == "mcp":
        _start_mcp()
        _command("mcp_bridge", "mcpserve", [PROG, "mcp", *rest], setup=False)
        return
    if command == "token":
        _command("accounts", "api_token", [PROG, "token", *rest], migrated=True)
        return
    if command == "manage":
        _django([f"{PROG} manage", *rest])
        return
    options = _parser().parse_args(args)
    if options.command == "serve":
        _serve(options.host, options.port)
    elif options.command == "project":
        action = options.action
        target = [options.target] if action != "list" else []
        _command(
            "workflows", f"project_{action}", [PROG, f"project {action}", *target], migrated=True
        )
    elif options.command == "connect":
        if options.token is not None and options.url is None:
            _parser().error("connect: --token goes with --url (a hosted server)")
        _connect(options.client, options.url, options.token)
