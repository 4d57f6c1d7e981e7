"""DeepWork Reviews: ``.deepreview`` rules turned into review tasks for agents.

Pure Python (no Django, no database) so the MCP bridge, a CLI and the tests can all call it. The
MCP layer uses the three functions re-exported here; the submodules hold the pipeline stages:
``config`` (parsing), ``discovery``, ``changes`` (git), ``matching`` (globs and strategies),
``instructions`` (review ids and files) and ``tools`` (the pipeline and its messages).
"""

from reviews.deepreview.tools import (
    get_configured_reviews,
    get_review_instructions,
    mark_review_as_passed,
)

__all__ = ["get_configured_reviews", "get_review_instructions", "mark_review_as_passed"]
