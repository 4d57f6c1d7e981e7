"""The insights endpoints' query and answer shapes (``/api/insights/...``, session history)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from ninja import Field, Schema

from api.schemas import Name
from insights.filters import MAX_RANGE_DAYS
from insights.tables import INSIGHT_NAMES

InsightName = Literal[INSIGHT_NAMES]  # type: ignore[valid-type]


class InsightQuery(Schema):
    """What an insight covers; whole UTC days, `until` included."""

    project: int | None = Field(
        None, ge=1, le=2**63 - 1, description="Project id; all if left out."
    )
    job: Name | None = Field(
        None, description="Job name, folder name, or the name it was started with."
    )
    workflow: Name | None = Field(None, description="Workflow name.")
    agent: Name | None = Field(None, description="Agent id.")
    dialect: Literal["deepwork", "deepwork-0.9", "deepwork-0.14", "tracker", "dag"] | None = Field(
        None,
        description=(
            "Only DeepWork sessions (`deepwork`: both generations; `deepwork-0.9` or "
            "`deepwork-0.14`: one), only tracked workflows, or only multi-agent DAG workflows."
        ),
    )
    since: dt.date | None = Field(
        None,
        description=f"First day (default: 30 days to `until`); {MAX_RANGE_DAYS} days at most.",
    )
    until: dt.date | None = Field(None, description="Last day (included); today if left out.")


class InsightFilters(Schema):
    since: str
    until: str
    project: int | None
    job: str | None
    workflow: str | None
    agent: str | None
    dialect: str | None


class InsightOut(Schema):
    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str]
    filters: InsightFilters


class HistoryOut(Schema):
    """A session's whole history (`format` names its version)."""

    format: str
    session: dict[str, Any]
    steps: list[dict[str, Any]]
    events: list[dict[str, Any]]
    events_truncated: bool
