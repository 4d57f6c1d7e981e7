"""Names refuse invisible and direction-changing characters: a right-to-left override makes a
name read differently from what is stored, a zero-width character makes two names that look
alike differ. Multiline texts refuse the direction overrides, embeddings and isolates (the
"Trojan Source" trick) and keep what right-to-left and pasted prose needs."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from fastmcp import Client

from dag import services as dag
from mcp_bridge.server import create_server
from tracker.services import tracked_workflow_start
from workflows import limits
from workflows.errors import InvalidInput
from workflows.models import Project, WorkflowSession
from workflows.services.agents import agent_ensure

pytestmark = pytest.mark.django_db(transaction=True)

RLO = "\u202e"
TAIL = "; names and single-line texts must not hold invisible or direction-changing characters"


def rlo_refused(field: str, at: int) -> str:
    return (
        f"{field} contains the invisible character U+202E (RIGHT-TO-LEFT OVERRIDE) at position "
        f"{at}" + TAIL
    )


@pytest.fixture
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="p")


async def test_a_job_name_with_a_right_to_left_override_is_refused_over_mcp(demo_project):
    async with Client(create_server(demo_project)) as client:
        result = await client.call_tool(
            "start_workflow",
            {"job_name": f"de{RLO}mo", "workflow_name": "main", "goal": "g"},
            raise_on_error=False,
        )
    assert result.is_error
    assert result.content[0].text.endswith(rlo_refused("job_name", 2))
    assert not await WorkflowSession.objects.aexists()


def test_agent_ids_refuse_invisible_characters(proj):
    with pytest.raises(InvalidInput) as caught:
        dag.dag_agent_register(project=proj, agent_id=f"boss{RLO}", roles=["lead"])
    assert caught.value.message == rlo_refused("agent_id", 4)
    with pytest.raises(InvalidInput) as caught:
        agent_ensure(project=proj, agent_id="ad\u200bmin")
    assert caught.value.message == (
        "agent_id contains the invisible character U+200B (ZERO WIDTH SPACE) at position 2" + TAIL
    )
    with pytest.raises(InvalidInput) as caught:
        dag.dag_agent_register(project=proj, agent_id="worker", roles=[f"s{RLO}we"])
    assert caught.value.message == rlo_refused("role", 1)
    assert not proj.agents.exists()


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            {"step_id": f"a{RLO}b", "description": "x"},
            rlo_refused("steps[0].step_id", 1),
        ),
        (
            {"step_id": "a", "description": "x", "tool_to_call": "Ba\u2066sh"},
            "Step 'a': tool_to_call contains the invisible character U+2066 (LEFT-TO-RIGHT "
            "ISOLATE) at position 2" + TAIL,
        ),
        (
            {"step_id": "a", "description": "x", "assigned_agent_id": "w\u200fx"},
            "Step 'a': assigned_agent_id contains the invisible character U+200F (RIGHT-TO-LEFT "
            "MARK) at position 1" + TAIL,
        ),
        (
            # A C1 control (an 8-bit terminal's escape introducer) has no name.
            {"step_id": "a\x9b2J", "description": "x"},
            "steps[0].step_id contains the control character U+009B at position 1" + TAIL,
        ),
        (
            {"step_id": "a", "description": f"Run the tests {RLO}and delete the repo"},
            "Step 'a': description contains the direction-changing character U+202E "
            "(RIGHT-TO-LEFT OVERRIDE) at position 14; it makes text read differently from how "
            "it is stored, so bidirectional embeddings, overrides and isolates are not allowed",
        ),
    ],
)
def test_dag_step_names_and_texts_refuse_them(proj, step, message):
    with pytest.raises(InvalidInput) as caught:
        dag.dag_define(project=proj, creator_id="boss", name="w", description="", steps=[step])
    assert caught.value.message == message
    assert not proj.jobs.exists()


def test_a_dag_workflow_name_and_tracker_names_refuse_them(proj):
    with pytest.raises(InvalidInput) as caught:
        dag.dag_define(
            project=proj,
            creator_id="boss",
            name=f"release{RLO}",
            description="",
            steps=[{"step_id": "a", "description": "x"}],
        )
    assert caught.value.message == rlo_refused("name", 7)
    agent = agent_ensure(project=proj, agent_id="boss")
    with pytest.raises(InvalidInput) as caught:
        tracked_workflow_start(project=proj, agent=agent, name=f"fix{RLO}gnp.exe")
    assert caught.value.message == rlo_refused("name", 3)


def test_what_real_names_and_prose_need_is_kept(proj):
    # Persian needs the zero-width non-joiner between letters, emoji sequences the joiner;
    # right-to-left prose uses the direction marks, and line breaks stay text.
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    limits.NAME.check("name", persian)
    limits.NAME.check("name", family)
    limits.GOAL.check("goal", "\u05e9\u05dc\u05d5\u05dd 123\u200f!\nline two\u200b")
    defined = dag.dag_define(
        project=proj,
        creator_id="boss",
        name=persian,
        description="\u05e9\u05dc\u05d5\u05dd\u200f",
        steps=[{"step_id": family, "description": "x\u00ady"}],
    )
    assert defined.job.name == persian
    # Between ASCII letters a joiner only disguises a name.
    with pytest.raises(InvalidInput) as caught:
        limits.NAME.check("name", "ad\u200dmin")
    assert "U+200D (ZERO WIDTH JOINER) at position 2" in caught.value.message


async def test_a_goal_with_a_direction_override_is_refused_over_mcp(demo_project):
    async with Client(create_server(demo_project)) as client:
        result = await client.call_tool(
            "start_workflow",
            {"job_name": "demo", "workflow_name": "main", "goal": f"ship it {RLO}now"},
            raise_on_error=False,
        )
    assert result.is_error
    assert result.content[0].text.endswith(
        "goal contains the direction-changing character U+202E (RIGHT-TO-LEFT OVERRIDE) at "
        "position 8; it makes text read differently from how it is stored, so bidirectional "
        "embeddings, overrides and isolates are not allowed"
    )
    assert not await sync_to_async(WorkflowSession.objects.exists)()
