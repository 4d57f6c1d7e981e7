"""Each client's configuration, checked against the format that client documents, and the
``connect`` command's output: files on stdout and nothing else, hints on stderr, and a token in
no file.

The documented formats (as of 2026-12):
- Claude Code ``.mcp.json``: ``mcpServers``; a remote server ``{"type": "http", "url",
  "headers"}``; ``${VAR}`` and ``${VAR:-default}`` expanded in command, args, env, url, headers.
- Codex ``config.toml``: ``[mcp_servers.<name>]`` with ``command``/``args``/``env_vars`` or
  ``url``/``bearer_token_env_var``, and ``startup_timeout_sec`` (a number of seconds).
- Cursor ``mcp.json``: ``mcpServers``; ``url`` and ``headers``; ``${workspaceFolder}`` and
  ``${env:NAME}`` expanded.
- VS Code ``.vscode/mcp.json``: ``servers`` (each with ``type``) and ``inputs``; a
  ``promptString`` input with ``password`` used as ``${input:<id>}``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deepwork_site import cli, connect

ROOT = Path(__file__).resolve().parents[2]
URL = "https://deepwork.example.com/mcp"
SECRET = "dwk_" + "s3cr3t" * 7
# What a client expands: ${NAME}, ${NAME:-default}, ${env:NAME}, ${input:id}, ${workspaceFolder}.
VARIABLE = re.compile(r"\$\{([^}]*)\}")


def files(configs: list[connect.ClientConfig], key: str) -> list[connect.Snippet]:
    (config,) = (c for c in configs if c.key == key)
    return [s for s in config.snippets if s.is_file]


def the_file(configs: list[connect.ClientConfig], key: str) -> str:
    (snippet,) = files(configs, key)
    return snippet.text


HOSTED = connect.hosted_configs(url=URL, token=SECRET)
STDIO = connect.stdio_configs()


def test_no_file_holds_the_token_and_only_the_export_line_does():
    for config in HOSTED:
        for snippet in config.snippets:
            assert (SECRET in snippet.text) == (not snippet.is_file), (config.key, snippet.where)
            if not snippet.is_file:
                assert snippet.text == f"export DEEPWORK_MCP_TOKEN={SECRET}\n"
    # Without a token the line says what goes there, quoted so a shell reads no redirection.
    (export,) = (s for s in connect.hosted_configs(url=URL)[0].snippets if not s.is_file)
    assert export.text == "export DEEPWORK_MCP_TOKEN='<your token>'\n"


def test_claude_code_reads_the_token_from_the_environment():
    config = json.loads(the_file(HOSTED, "claude-code"))
    assert config == {
        "mcpServers": {
            "deepwork": {
                "type": "http",
                "url": URL,
                "headers": {"Authorization": "Bearer ${DEEPWORK_MCP_TOKEN}"},
            }
        }
    }
    stdio = json.loads(the_file(STDIO, "claude-code"))["mcpServers"]["deepwork"]
    # The project folder Claude Code names, or the folder it started the server in.
    assert stdio == {
        "command": "uvx",
        "args": ["deepwork-server", "mcp", "--path", "${CLAUDE_PROJECT_DIR:-.}"],
    }


def test_codex_waits_long_enough_for_a_first_start_and_reads_the_token_by_name():
    hosted = tomllib.loads(the_file(HOSTED, "codex"))["mcp_servers"]["deepwork"]
    assert hosted == {
        "url": URL,
        "bearer_token_env_var": "DEEPWORK_MCP_TOKEN",
        "startup_timeout_sec": 60,
    }
    stdio = tomllib.loads(the_file(STDIO, "codex"))["mcp_servers"]["deepwork"]
    assert (stdio["command"], stdio["args"]) == ("uvx", ["deepwork-server", "mcp", "--path", "."])
    assert isinstance(stdio["startup_timeout_sec"], int)
    assert stdio["startup_timeout_sec"] > 10  # Codex's default
    # The variables that point a stdio server at the dashboard's database reach it.
    assert stdio["env_vars"] == ["DEEPWORK_VAR_DIR", "DATABASE_URL", "REDIS_URL"]


def test_cursor_uses_its_workspace_folder_and_env_variables():
    hosted = json.loads(the_file(HOSTED, "cursor"))["mcpServers"]["deepwork"]
    assert hosted == {"url": URL, "headers": {"Authorization": "Bearer ${env:DEEPWORK_MCP_TOKEN}"}}
    stdio = json.loads(the_file(STDIO, "cursor"))["mcpServers"]["deepwork"]
    assert stdio["args"][-2:] == ["--path", "${workspaceFolder}"]


def test_vscode_prompts_for_the_token_as_a_password():
    config = json.loads(the_file(HOSTED, "vscode"))
    (prompt,) = config["inputs"]
    assert prompt == {
        "type": "promptString",
        "id": "deepwork-token",
        "description": "deepwork-server MCP token",
        "password": True,
    }
    assert config["servers"]["deepwork"] == {
        "type": "http",
        "url": URL,
        "headers": {"Authorization": "Bearer ${input:deepwork-token}"},
    }
    stdio = json.loads(the_file(STDIO, "vscode"))["servers"]["deepwork"]
    assert (stdio["type"], stdio["args"][-1]) == ("stdio", "${workspaceFolder}")


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("claude-code", {"DEEPWORK_MCP_TOKEN", "CLAUDE_PROJECT_DIR:-."}),
        ("codex", set()),
        ("cursor", {"env:DEEPWORK_MCP_TOKEN", "workspaceFolder"}),
        ("vscode", {"input:deepwork-token", "workspaceFolder"}),
    ],
)
def test_each_file_uses_only_variables_its_client_expands(key: str, allowed: set[str]):
    used = {
        name
        for configs in (HOSTED, STDIO)
        for snippet in files(configs, key)
        for name in VARIABLE.findall(snippet.text)
    }
    assert used <= allowed
    # VS Code prompts only for inputs the file declares.
    if key == "vscode":
        declared = {i["id"] for i in json.loads(the_file(HOSTED, key))["inputs"]}
        assert {n.removeprefix("input:") for n in used if n.startswith("input:")} == declared


def test_connect_prints_only_the_file_on_stdout_and_hints_on_stderr(capsys):
    cli.main(["connect", "--client", "claude-code", "--url", URL, "--token", SECRET])
    out, err = capsys.readouterr()
    assert json.loads(out) == json.loads(the_file(HOSTED, "claude-code"))
    assert SECRET not in out
    assert "# Claude Code: .mcp.json" in err
    assert f"#   export DEEPWORK_MCP_TOKEN={SECRET}" in err
    # A hosted configuration needs no token on the command line: the files never hold it.
    cli.main(["connect", "--client", "vscode", "--url", "https://deepwork.example.com"])
    out, _ = capsys.readouterr()
    assert json.loads(out)["servers"]["deepwork"]["url"] == URL
    cli.main(["connect", "--client", "claude-code"])
    out, err = capsys.readouterr()
    assert json.loads(out) == json.loads(the_file(STDIO, "claude-code"))
    assert "#   claude mcp add deepwork -- uvx deepwork-server mcp --path ." in err


def test_connect_appends_to_an_existing_codex_config(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text('model = "o4"\n\n[mcp_servers.other]\ncommand = "other"\n')
    with config.open("a") as appended:
        subprocess.run(
            [sys.executable, "-m", "deepwork_server", "connect", "--client", "codex", "--url", URL],
            cwd=ROOT,
            stdout=appended,
            stderr=subprocess.PIPE,
            check=True,
            timeout=120,
        )
    servers = tomllib.loads(config.read_text())["mcp_servers"]
    assert set(servers) == {"other", "deepwork"}
    assert servers["deepwork"]["bearer_token_env_var"] == "DEEPWORK_MCP_TOKEN"
