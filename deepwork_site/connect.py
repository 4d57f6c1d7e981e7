"""How an MCP client connects to this server: the configuration each client reads, either for a
stdio server the person runs in their own project, or for this server's hosted ``/mcp`` with an
API token. Below every interface, so the dashboard's Connect page and the command line print
the same text.

The formats are those each client documents: Claude Code's ``.mcp.json`` (``mcpServers``;
``"type": "http"`` with ``headers`` for a remote server) and ``claude mcp add``; Codex's
``config.toml`` (``[mcp_servers.<name>]``; a remote server's token read from the environment
variable ``bearer_token_env_var`` names); Cursor's ``.cursor/mcp.json`` (``mcpServers``; ``url``
and ``headers``); VS Code's ``.vscode/mcp.json`` (``servers``, each with a ``type``).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

# Where the web server serves hosted MCP (``mcp_bridge.hosted`` mounts it here).
MCP_PATH = "/mcp"
SERVER_NAME = "deepwork"
# The stdio server, run by the client in the project it opens.
STDIO_COMMAND = ("uvx", "deepwork-server", "mcp", "--path", ".")
# The same from a clone of this repository, until the package is installed.
CLONE_COMMAND = ".venv/bin/python manage.py mcpserve --path ."
# Codex reads a remote server's bearer token from the environment, not from its config file.
TOKEN_ENV = "DEEPWORK_MCP_TOKEN"


@dataclass(frozen=True)
class Snippet:
    """One thing to paste: ``where`` it goes, in ``language`` (json, toml or shell)."""

    where: str
    language: str
    text: str


@dataclass(frozen=True)
class ClientConfig:
    key: str
    name: str
    snippets: tuple[Snippet, ...]


def _json(value: object) -> str:
    return json.dumps(value, indent=2) + "\n"


def _toml_string(value: str) -> str:
    # A JSON string (ASCII, escaped) is also a TOML basic string.
    return json.dumps(value)


def _toml_table(name: str, fields: dict[str, str | list[str]]) -> str:
    lines = [f"[mcp_servers.{name}]"]
    for key, value in fields.items():
        if isinstance(value, list):
            rendered = "[" + ", ".join(_toml_string(item) for item in value) + "]"
        else:
            rendered = _toml_string(value)
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"


def stdio_configs() -> list[ClientConfig]:
    """Each client's configuration of a stdio server of the project it is opened in."""
    command, *args = STDIO_COMMAND
    stdio: dict[str, str | list[str]] = {"command": command, "args": args}
    vscode_args = [*args[:-1], "${workspaceFolder}"]
    return [
        ClientConfig(
            "claude-code",
            "Claude Code",
            (
                Snippet(
                    "Shell, in the project folder",
                    "shell",
                    f"claude mcp add {SERVER_NAME} -- {shlex.join(STDIO_COMMAND)}\n",
                ),
                Snippet(
                    ".mcp.json in the project folder",
                    "json",
                    _json({"mcpServers": {SERVER_NAME: stdio}}),
                ),
            ),
        ),
        ClientConfig(
            "codex",
            "Codex",
            (Snippet("~/.codex/config.toml", "toml", _toml_table(SERVER_NAME, stdio)),),
        ),
        ClientConfig(
            "cursor",
            "Cursor",
            (
                Snippet(
                    ".cursor/mcp.json in the project folder",
                    "json",
                    _json({"mcpServers": {SERVER_NAME: stdio}}),
                ),
            ),
        ),
        ClientConfig(
            "vscode",
            "VS Code",
            (
                Snippet(
                    ".vscode/mcp.json in the project folder",
                    "json",
                    _json(
                        {
                            "servers": {
                                SERVER_NAME: {
                                    "type": "stdio",
                                    "command": command,
                                    "args": vscode_args,
                                }
                            }
                        }
                    ),
                ),
            ),
        ),
    ]


def hosted_configs(*, url: str, token: str) -> list[ClientConfig]:
    """Each client's configuration of the hosted server at ``url`` with the bearer ``token``."""
    bearer = f"Bearer {token}"
    remote = {"type": "http", "url": url, "headers": {"Authorization": bearer}}
    return [
        ClientConfig(
            "claude-code",
            "Claude Code",
            (
                Snippet(
                    "Shell (kept in your own Claude Code settings, not in the project)",
                    "shell",
                    f"claude mcp add --transport http --scope user {SERVER_NAME} "
                    f"{shlex.quote(url)} --header {shlex.quote('Authorization: ' + bearer)}\n",
                ),
                Snippet(".mcp.json", "json", _json({"mcpServers": {SERVER_NAME: remote}})),
            ),
        ),
        ClientConfig(
            "codex",
            "Codex",
            (
                Snippet(
                    "~/.codex/config.toml",
                    "toml",
                    _toml_table(SERVER_NAME, {"url": url, "bearer_token_env_var": TOKEN_ENV}),
                ),
                Snippet(
                    "Shell, before starting Codex",
                    "shell",
                    f"export {TOKEN_ENV}={shlex.quote(token)}\n",
                ),
            ),
        ),
        ClientConfig(
            "cursor",
            "Cursor",
            (
                Snippet(
                    "~/.cursor/mcp.json",
                    "json",
                    _json(
                        {"mcpServers": {SERVER_NAME: {"url": url, "headers": remote["headers"]}}}
                    ),
                ),
            ),
        ),
        ClientConfig(
            "vscode",
            "VS Code",
            (Snippet(".vscode/mcp.json", "json", _json({"servers": {SERVER_NAME: remote}})),),
        ),
    ]
