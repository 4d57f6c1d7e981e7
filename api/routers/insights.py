"""Insights over REST, at /api/insights/: each insight's table as JSON or CSV, filtered as the
dashboard's insights pages filter it."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Router
from ninja.params.functions import Query

from accounts.identity import identity_project_scope
from api.auth import VIEW, TokenAuth, caller
from api.common import READ_ERRORS
from api.routers.insights_schemas import InsightName, InsightOut, InsightQuery
from insights.filters import InsightFilter, insight_filter
from insights.tables import insight_table
from workflows.selectors.catalog import project_get

CSV_ANSWER = {"200": {"content": {"text/csv": {"schema": {"type": "string"}}}}}

router = Router()


def _insight_filter(request: HttpRequest, query: InsightQuery) -> InsightFilter:
    project_id = identity_project_scope(caller(request), query.project)
    if project_id is not None:
        project_get(project_id=project_id)  # an unknown project is a 404, not an empty chart
    return insight_filter(
        since=query.since,
        until=query.until,
        project_id=project_id,
        job=query.job,
        workflow=query.workflow,
        agent_id=query.agent,
        dialect=query.dialect,
        # Any range the schema allows is answered: a backwards one is empty, a longer one is
        # cut to the limit, and the answer's notes say so.
        clamp=True,
    )


@router.get(
    "/{name}",
    response={200: InsightOut, **READ_ERRORS},
    tags=["insights"],
    auth=TokenAuth(VIEW),
)
def get_insight(
    request: HttpRequest, name: InsightName, query: Annotated[InsightQuery, Query()]
) -> dict[str, Any]:
    """One insight's table (`columns`, `rows`), as the dashboard's insights pages draw it."""
    filters = _insight_filter(request, query)
    return insight_table(name=name, filters=filters).as_json(filters)


@router.get(
    "/{name}/csv",
    response={**READ_ERRORS},
    tags=["insights"],
    auth=TokenAuth(VIEW),
    openapi_extra={"responses": CSV_ANSWER},
)
def get_insight_csv(
    request: HttpRequest, name: InsightName, query: Annotated[InsightQuery, Query()]
) -> HttpResponse:
    """The same table as CSV: a header row, then one row per line."""
    filters = _insight_filter(request, query)
    response = HttpResponse(
        insight_table(name=name, filters=filters).as_csv(), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response
