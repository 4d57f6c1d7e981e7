"""How an MCP client connects to this server: the configuration each client reads, either for a
stdio server the person runs in their own project, or for this server's hosted ``/mcp`` with an
API token. Below every interface, so the dashboard's Connect page and the command line print
the same text.

The formats are those each client documents:

- Claude Code: ``.mcp.json`` (``mcpServers``; ``"type": "http"`` with ``headers`` for a remote
  server), which expands ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``,
  ``url`` and ``headers``; its plugins' servers get the project folder as
  ``${CLAUDE_PROJECT_DIR}``.
- Codex: ``config.toml`` (``[mcp_servers.<name>]``; ``startup_timeout_sec``, 10 seconds when
  not given; ``env_vars`` names the variables passed on to a stdio server, which otherwise gets
  only a few; a remote server's token read from the variable ``bearer_token_env_var`` names).
- Cursor: ``mcp.json`` (``mcpServers``; ``url`` and ``headers``), which expands
  ``${workspaceFolder}`` and ``${env:NAME}``.
- VS Code: ``.vscode/mcp.json`` (``servers``, each with a ``type``; ``inputs`` the editor
  prompts for, a ``promptString`` with ``password`` kept in its secret storage, used as
  ``${input:<id>}``), which expands ``${workspaceFolder}``.

A file snippet never holds a token: it names the environment variable (or the client's
prompt) the token comes from, so the file can be shared or committed. The token itself is
only in a shell snippet (``export ...``), which is a hint to run, never a file's content.
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
# Where each client's file names the project folder, rather than trusting the folder the
# client happens to start the server in. Claude Code's falls back to that folder when it sets
# no project folder.
CLAUDE_PROJECT = "${CLAUDE_PROJECT_DIR:-.}"
WORKSPACE_FOLDER = "${workspaceFolder}"
# Every client reads the hosted token from here (VS Code asks for it instead).
TOKEN_ENV = "DEEPWORK_MCP_TOKEN"
VSCODE_TOKEN_INPUT = "deepwork-token"
# A first start may migrate a new database; Codex's default of 10 seconds can be too short.
CODEX_STARTUP_TIMEOUT_SEC = 60
# What a stdio server reads to find the database the dashboard uses; Codex passes a server
# only a few variables of its own unless told to pass these.
SERVER_ENV_VARS = ("DEEPWORK_VAR_DIR", "DATABASE_URL", "REDIS_URL")
FILE_LANGUAGES = frozenset({"json", "toml"})


@dataclass(frozen=True)
class Snippet:
    """One thing to paste: ``where`` it goes, in ``language`` (json or toml: a file's content;
    shell: a command to run)."""

    where: str
    language: str
    text: str

    @property
    def is_file(self) -> bool:
        return self.language in FILE_LANGUAGES


@dataclass(frozen=True)
class ClientConfig:
    key: str
    name: str
    snippets: tuple[Snippet, ...]


def _json(value: object) -> str:
    return json.dumps(value, indent=2) + "\n"


def _toml_value(value: str | int | list[str]) -> str:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    # A JSON string (ASCII, escaped) is also a TOML basic string.
    return json.dumps(value)


def _toml_table(name: str, fields: dict[str, str | int | list[str]]) -> str:
    lines = [f"[mcp_servers.{name}]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def _stdio_args(project: str) -> list[str]:
    return [*STDIO_COMMAND[1:-1], project]


def stdio_configs() -> list[ClientConfig]:
    """Each client's configuration of a stdio server of the project it is opened in."""
    command = STDIO_COMMAND[0]
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
                    _json(
                        {
                            "mcpServers": {
                                SERVER_NAME: {
                                    "command": command,
                                    "args": _stdio_args(CLAUDE_PROJECT),
                                }
                            }
                        }
                    ),
                ),
            ),
        ),
        ClientConfig(
            "codex",
            "Codex",
            (
                Snippet(
                    "~/.codex/config.toml (Codex starts it in the folder it works in)",
                    "toml",
                    _toml_table(
                        SERVER_NAME,
                        {
                            "command": command,
                            "args": list(STDIO_COMMAND[1:]),
                            "env_vars": list(SERVER_ENV_VARS),
                            "startup_timeout_sec": CODEX_STARTUP_TIMEOUT_SEC,
                        },
                    ),
                ),
            ),
        ),
        ClientConfig(
            "cursor",
            "Cursor",
            (
                Snippet(
                    ".cursor/mcp.json in the project folder",
                    "json",
                    _json(
                        {
                            "mcpServers": {
                                SERVER_NAME: {
                                    "command": command,
                                    "args": _stdio_args(WORKSPACE_FOLDER),
                                }
                            }
                        }
                    ),
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
                                    "args": _stdio_args(WORKSPACE_FOLDER),
                                }
                            }
                        }
                    ),
                ),
            ),
        ),
    ]


def token_export(token: str | None) -> Snippet:
    """The shell line that hands the token to a client started from that shell; without a
    token, a placeholder to replace."""
    value = shlex.quote(token or "<your token>")
    return Snippet(
        "Shell, before starting the client (or your shell's profile)",
        "shell",
        f"export {TOKEN_ENV}={value}\n",
    )


def hosted_configs(*, url: str, token: str | None = None) -> list[ClientConfig]:
    """Each client's configuration of the hosted server at ``url``: files that read the token
    from ``$DEEPWORK_MCP_TOKEN`` (VS Code: from its prompt), and the line that sets it, with
    ``token`` when given."""
    export = token_export(token)
    from_env = {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"}
    return [
        ClientConfig(
            "claude-code",
            "Claude Code",
            (
                Snippet(
                    ".mcp.json",
                    "json",
                    _json(
                        {
                            "mcpServers": {
                                SERVER_NAME: {"type": "http", "url": url, "headers": from_env}
                            }
                        }
                    ),
                ),
                export,
            ),
        ),
        ClientConfig(
            "codex",
            "Codex",
            (
                Snippet(
                    "~/.codex/config.toml",
                    "toml",
                    _toml_table(
                        SERVER_NAME,
                        {
                            "url": url,
                            "bearer_token_env_var": TOKEN_ENV,
                            "startup_timeout_sec": CODEX_STARTUP_TIMEOUT_SEC,
                        },
                    ),
                ),
                export,
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
                        {
                            "mcpServers": {
                                SERVER_NAME: {
                                    "url": url,
                                    "headers": {"Authorization": f"Bearer ${{env:{TOKEN_ENV}}}"},
                                }
                            }
                        }
                    ),
                ),
                export,
            ),
        ),
        ClientConfig(
            "vscode",
            "VS Code",
            (
                Snippet(
                    ".vscode/mcp.json (VS Code asks for the token once and keeps it secret)",
                    "json",
                    _json(
                        {
                            "inputs": [
                                {
                                    "type": "promptString",
                                    "id": VSCODE_TOKEN_INPUT,
                                    "description": "deepwork-server MCP token",
                                    "password": True,
                                }
                            ],
                            "servers": {
                                SERVER_NAME: {
                                    "type": "http",
                                    "url": url,
                                    "headers": {
                                        "Authorization": f"Bearer ${{input:{VSCODE_TOKEN_INPUT}}}"
                                    },
                                }
                            },
                        }
                    ),
                ),
            ),
        ),
    ]
