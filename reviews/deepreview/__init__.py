"""DeepWork Reviews: ``.deepreview`` rules turned into review tasks for agents.

Pure Python (no Django, no database) so the MCP bridge, a CLI and the tests can all call it. The
MCP layer uses the three functions re-exported here; the submodules hold the pipeline stages:
``config`` (parsing), ``discovery``, ``changes`` (git), ``matching`` (globs and strategies),
``instructions`` (review ids and files) and ``tools`` (the pipeline and its messages).
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_configured_reviews", "get_review_instructions", "mark_review_as_passed"]


def __getattr__(name: str) -> Any:
    # The pipeline (globs, JSON Schema) loads on first use: a server that only reads a setting
    # of this package (``precompute``'s command policy) starts without it.
    if name in __all__:
        from reviews.deepreview import tools

        return getattr(tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
