"""Sanity checks that ``run.sh`` makes before the conformance suite (standard library only).

1. The server itself (``mcpserve`` or ``/mcp`` of the ASGI app) demands the bearer token: a
   POST without it gets 401.
2. Through the auth proxy a real MCP exchange works, and ``get_workflows`` lists the
   throwaway job without load errors, so the suite runs against a server that has something
   to list (and a broken fixture job cannot go unnoticed).

Usage: python preflight.py SERVER_PORT PROXY_PORT JOB_NAME
"""

from __future__ import annotations

import http.client
import json
import sys

ACCEPT = "application/json, text/event-stream"


def post(port: int, message: dict, session: str | None = None) -> tuple[int, dict, dict | None]:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-06-18"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = conn.getresponse()
        body = response.read().decode()
        response_headers = {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()
    return response.status, response_headers, _reply(body, response_headers, message.get("id"))


def _reply(body: str, headers: dict, wanted_id) -> dict | None:
    """The JSON-RPC reply with ``wanted_id`` from a JSON or SSE body."""
    if wanted_id is None or not body.strip():
        return None
    if headers.get("content-type", "").startswith("text/event-stream"):
        for event in body.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(
                line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")
            )
            if data:
                message = json.loads(data)
                if message.get("id") == wanted_id:
                    return message
        return None
    return json.loads(body)


def main() -> int:
    server_port, proxy_port, job_name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "deepwork-conformance-preflight", "version": "0"},
        },
    }
    problems = []

    status, _, _ = post(server_port, initialize)
    print(f"conformance: preflight: the server without a token -> HTTP {status}", file=sys.stderr)
    if status != 401:
        problems.append(f"expected 401 from the server without a token, got {status}")

    status, headers, reply = post(proxy_port, initialize)
    session = headers.get("mcp-session-id")
    if status != 200 or not reply or "result" not in reply:
        problems.append(f"initialize through the proxy failed: HTTP {status}, {reply}")
    else:
        post(proxy_port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_workflows", "arguments": {}},
        }
        status, _, reply = post(proxy_port, call, session)
        result = (reply or {}).get("result") or {}
        listing = result.get("structuredContent") or {}
        jobs = [job.get("name") for job in listing.get("jobs", [])]
        errors = listing.get("errors", [])
        print(
            f"conformance: preflight: via the proxy, get_workflows -> HTTP {status}, "
            f"jobs={jobs}, errors={len(errors)}",
            file=sys.stderr,
        )
        if result.get("isError") or job_name not in jobs or errors:
            problems.append(f"get_workflows did not list {job_name!r} cleanly: {reply}")
        if session:  # end the session politely
            conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
            conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": session})
            conn.getresponse().read()
            conn.close()

    for problem in problems:
        print(f"conformance: preflight: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
