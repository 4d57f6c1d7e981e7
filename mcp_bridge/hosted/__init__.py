"""Hosted MCP: ``/mcp`` of the web server, where every API token allowed MCP is an agent.

An agent anywhere adds one URL and one token to its MCP configuration. Each request passes,
in order: FastMCP's Host/Origin guard (the one ``mcpserve --transport http`` uses, fed with
``ALLOWED_HOSTS``), the MCP SDK's request body limit, the bearer token (``ApiToken`` with
``mcp`` set, its user allowed to drive sessions), the project (the token's own, or named by
the request), then the FastMCP app of that project and toolsets.

Why stateless: every worker (and machine) behind the same database serves any request. The
MCP SDK's stateless streamable HTTP keeps nothing between requests (no session ids, no
streams to resume), so a handshake-era client's next call may land on another worker; the
2026-07-28 era is sessionless anyway. Everything an agent's calls share (its stack) is in the
database, found through the token.

Per process, one FastMCP server per (project, toolsets) is built on first use and kept; its
tools act through a ``HostedState`` whose agent is the one of the request being served (a
context variable set here, copied by asyncio into the tool's task and by asgiref into the
database thread the request was given, one of a small pool per process).

A request stays authorised only as long as its token: while a request is open (a long tool
call, a stream), the token is checked again every ``DEEPWORK_MCP_RECHECK_SECONDS``; a token
revoked meanwhile ends the request with an error naming the revocation.

The modules, in the order a request meets them:

- ``asgi``: the ASGI app of ``/mcp`` (guards, bearer token, re-check while a request is open);
- ``auth``: a request's headers to the identity it acts as (token, project, agent, roles);
- ``servers``: this process's FastMCP app per (project, toolsets), started on first use;
- ``state``: the state a server's tools see, whose agent is the request's;
- ``threads``: the database threads the requests' Django work runs on;
- ``config`` and ``refusals``: how ``/mcp`` is set up, and what it answers when it will not
  serve.
"""
