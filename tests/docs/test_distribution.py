"""The files that let people install the server without a clone: the Claude Code plugin
marketplace (``.claude-plugin/marketplace.json`` and the plugin it lists) and the MCP registry's
``server.json``. Each must parse, carry the fields its format requires, and run a command that
exists: a console script of ``pyproject.toml``, a real subcommand of ``deepwork-server``, with
arguments the MCP server's own parser accepts."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError

from deepwork_site import cli, connect
from mcp_bridge.management.commands.mcpserve import Command as McpServe

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
SERVER_JSON = ROOT / "server.json"
# Claude Code's plugin and marketplace names: kebab-case.
KEBAB = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
# The registry's server name: a reverse-DNS namespace, one slash, then the server's name.
REGISTRY_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def check_server_command(command: str, args: list[str], path: str = ".") -> None:
    """``command args`` runs this package's MCP server: ``uvx`` (or the script itself) starts a
    console script of pyproject.toml, whose subcommand ``cli`` knows, and whose remaining
    arguments the MCP server's parser takes, with the project folder ``path``. Raises
    AssertionError (or the parser's CommandError) otherwise."""
    argv = [command, *args]
    if argv[0] == "uvx":
        argv = argv[1:]
    script, subcommand, *rest = argv
    assert script in PYPROJECT["scripts"], f"{script!r} is not a console script"
    assert PYPROJECT["scripts"][script] == "deepwork_server:main"
    known = cli._parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert subcommand in known, f"{subcommand!r} is not a subcommand of {script}"
    assert subcommand == "mcp", "an MCP client must start the MCP server"
    options = McpServe().create_parser(script, subcommand).parse_args(rest)
    assert options.path == path


def test_the_marketplace_lists_the_plugin():
    marketplace = _json(MARKETPLACE)
    assert KEBAB.match(marketplace["name"])
    assert marketplace["owner"]["name"]
    assert marketplace["metadata"]["version"] == PYPROJECT["version"]
    (entry,) = marketplace["plugins"]
    assert KEBAB.match(entry["name"])
    assert entry["source"].startswith("./")
    assert entry["version"] == PYPROJECT["version"]
    folder = (MARKETPLACE.parent.parent / entry["source"]).resolve()
    assert folder.is_relative_to(ROOT)
    manifest = _json(folder / ".claude-plugin" / "plugin.json")
    assert manifest["name"] == entry["name"]
    assert manifest["version"] == entry["version"]
    assert manifest["description"] == entry["description"]


def test_the_plugin_runs_the_mcp_server_with_uvx_in_the_project_folder():
    """The plugin's server is the one the Connect page gives Claude Code: started by the
    plugin, whose folder is not the project, it is told the project folder Claude Code sets."""
    (entry,) = _json(MARKETPLACE)["plugins"]
    plugin = _json(MARKETPLACE.parent.parent / entry["source"] / ".mcp.json")
    claude = next(c for c in connect.stdio_configs() if c.key == "claude-code")
    (project_file,) = (s for s in claude.snippets if s.is_file)
    assert plugin == json.loads(project_file.text)
    server = plugin["mcpServers"][connect.SERVER_NAME]
    assert server["args"][-1] == "${CLAUDE_PROJECT_DIR:-.}"
    check_server_command(server["command"], server["args"], path=connect.CLAUDE_PROJECT)


def test_server_json_names_the_package_and_the_hosted_remote():
    server = _json(SERVER_JSON)
    assert server["$schema"].startswith("https://static.modelcontextprotocol.io/schemas/")
    assert REGISTRY_NAME.match(server["name"])
    assert 0 < len(server["description"]) <= 100
    assert server["version"] == PYPROJECT["version"]

    (package,) = server["packages"]
    assert package["registryType"] == "pypi"
    assert package["identifier"] == PYPROJECT["name"]
    assert package["version"] == PYPROJECT["version"]
    assert package["transport"] == {"type": "stdio"}
    args: list[str] = []
    for argument in package["packageArguments"]:
        if argument["type"] == "named":
            args += [argument["name"], argument["value"]]
        else:
            assert argument["type"] == "positional"
            args.append(argument["value"])
    check_server_command(package.get("runtimeHint", "uvx"), [package["identifier"], *args])

    (remote,) = server["remotes"]
    assert remote["type"] == "streamable-http"
    assert remote["url"].startswith("https://")
    assert remote["url"].endswith(connect.MCP_PATH)
    for name in re.findall(r"{(\w+)}", remote["url"]):
        assert remote["variables"][name]["isRequired"] is True
    (header,) = remote["headers"]
    assert header["name"] == "Authorization"
    assert header["isSecret"] is True
    assert header["value"].startswith("Bearer ")


def test_the_readme_claims_the_registry_name():
    """The registry accepts a PyPI package only when its description (the README) names the
    server: ``mcp-name: <name>``."""
    name = _json(SERVER_JSON)["name"]
    assert f"mcp-name: {name}" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert PYPROJECT["readme"] == "README.md"


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("uvx", ["deepwork", "serve", "--path", "."]),  # another package's command
        ("uvx", ["deepwork-server", "serve"]),  # a real subcommand, but not the MCP server
        ("uvx", ["deepwork-server", "mcpserve", "--path", "."]),  # not a subcommand
    ],
)
def test_a_wrong_command_is_caught(command: str, args: list[str]):
    with pytest.raises(AssertionError):
        check_server_command(command, args)


def test_an_option_the_server_does_not_take_is_caught():
    with pytest.raises(CommandError, match="--folder"):
        check_server_command("uvx", ["deepwork-server", "mcp", "--folder", "."])
