"""What ``/mcp`` answers when it will not serve a request: an HTTP status and a JSON-RPC
error in plain words."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send


class Refused(Exception):
    """A request ``/mcp`` will not serve: its HTTP status, a short code and plain words."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def json_rpc_error(message: str, request_id: Any = None, code: int = -32600) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body).encode()


async def refuse(send: Send, refusal: Refused) -> None:
    headers = [(b"content-type", b"application/json")]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": json_rpc_error(refusal.message)})
