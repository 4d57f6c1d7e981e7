"""The tracker's REST endpoints: lists and reads of what agents recorded, and a person's
written answer to a blocker, with the same token auth, error shape and keyset pages as the
rest of /api/."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.api.conftest import DECIDE, RESOLVE_BLOCKER, VIEW, assert_error
from tracker import services as tracker
from tracker.models import Issue, Task, TrackedWorkflow
from tracker.selectors import context_get
from workflows.models import Agent, Event, Project
from workflows.services.agents import agent_ensure
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db

# Every request authenticates first: the token with its user (1), then the user's own and
# group permissions (2). A token's last use is written at most once a minute, so each test
# makes one request before it counts.
AUTH_QUERIES = 3


def begin(project: Project, agent: Agent, name: str = "w", **extra: object) -> TrackedWorkflow:
    return tracker.tracked_workflow_start(project=project, agent=agent, name=name, **extra)


def task(
    project: Project, agent: Agent, workflow: TrackedWorkflow, name: str = "t", **extra: object
) -> Task:
    return tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name=name, goal="g", **extra
    ).task


def blocker(project: Project, agent: Agent, on: Task, description: str = "which?") -> Issue:
    return tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(on.pk),
        type="unclear_requirement",
        description=description,
        resolution="asked",
        requires_human_review=True,
    )


@pytest.fixture
def decider(make_caller):
    return make_caller(VIEW, RESOLVE_BLOCKER, username="ada")


# Auth and the error shape


def test_every_tracker_operation_needs_a_token_and_its_permission(
    viewer, make_caller, project, agent
):
    workflow = begin(project, agent)
    issue = blocker(project, agent, task(project, agent, workflow))
    reads = [
        "/api/tracker/workflows",
        f"/api/tracker/workflows/{workflow.pk}",
        f"/api/tracker/workflows/{workflow.pk}/tasks",
        f"/api/tracker/workflows/{workflow.pk}/decisions",
        f"/api/tracker/workflows/{workflow.pk}/issues",
        f"/api/tracker/workflows/{workflow.pk}/milestones",
        f"/api/tracker/tasks/{issue.task_id}/subtasks",
    ]
    anonymous = make_caller(VIEW)
    anonymous.token = None
    nobody = make_caller()
    for path in reads:
        assert_error(anonymous.get(path), 401, "unauthorized")
        assert_error(nobody.get(path), 403, "forbidden")
        assert viewer.get(path).status_code == 200, path
    resolve = f"/api/tracker/issues/{issue.pk}/resolve"
    assert_error(anonymous.post(resolve, {"resolution": "r"}), 401, "unauthorized")
    # Reading is not deciding.
    error = assert_error(viewer.post(resolve, {"resolution": "r"}), 403, "forbidden")
    assert RESOLVE_BLOCKER in error["message"]
    issue.refresh_from_db()
    assert issue.resolved_at is None
    assert not Event.objects.filter(kind="issue:updated").exists()


def test_unknown_ids_and_bad_parameters_get_the_one_error_shape(viewer, decider, project, agent):
    workflow = begin(project, agent)
    missing = workflow.pk + 1000
    for suffix in ("", "/tasks", "/decisions", "/issues", "/milestones"):
        error = assert_error(
            viewer.get(f"/api/tracker/workflows/{missing}{suffix}"), 404, "not_found"
        )
        assert str(missing) in error["message"]
    error = assert_error(
        decider.post(f"/api/tracker/issues/{missing}/resolve", {"resolution": "r"}),
        404,
        "not_found",
    )
    assert f"issue {missing}" in error["message"]
    for name, bad in [
        ("status", "DONE"),
        ("status", "In_Progress"),
        ("status", "in progress"),
        ("status", ""),
        ("profile", "huge"),
        ("profile", "Simple"),
    ]:
        error = assert_error(
            viewer.get("/api/tracker/workflows", **{name: bad}), 400, "invalid_request"
        )
        assert error["details"][0]["loc"] == ["query", name]
        valid = "'in_progress'" if name == "status" else "'simple'"
        assert valid in error["details"][0]["msg"], error
    error = assert_error(viewer.get("/api/tracker/workflows", cursor=0), 400, "invalid_request")
    assert error["details"][0]["loc"] == ["query", "cursor"]
    error = assert_error(
        viewer.get(f"/api/tracker/workflows/{workflow.pk}/tasks", limit=201), 400, "invalid_request"
    )
    assert error["details"][0]["loc"] == ["query", "limit"]
    error = assert_error(
        viewer.get(f"/api/tracker/workflows/{workflow.pk}/issues", blockers="all"),
        400,
        "invalid_request",
    )
    assert error["details"][0]["loc"] == ["query", "blockers"]
    assert_error(viewer.get("/api/tracker/workflows/0"), 400, "invalid_request")


# Reads


def test_workflow_list_filters_and_pages(viewer, project, agent, tmp_path):
    other_project = project_ensure(root_path=tmp_path / "elsewhere")
    other_agent = agent_ensure(project=other_project, agent_id="bob")
    ids = [begin(project, agent, f"w{n}", profile="simple").pk for n in range(5)]
    theirs = begin(other_project, other_agent, "theirs", profile="complex")
    tracker.tracked_workflow_complete(
        project=project, agent=agent, workflow_id=str(ids[1]), status="partial", summary="s"
    )

    page = viewer.get("/api/tracker/workflows").json()
    assert [item["id"] for item in page["items"]] == [theirs.pk, *reversed(ids)]
    assert page["next_cursor"] is None
    first = page["items"][0]
    assert first["project_id"] == other_project.pk
    assert first["project_name"] == "elsewhere"
    assert first["agent_id"] == "bob"
    assert first["profile"] == "COMPLEX"
    assert first["status"] == "IN_PROGRESS"
    assert first["completed_at"] is None
    datetime.fromisoformat(first["created_at"])

    def ids_of(**params: object) -> list[int]:
        return [
            item["id"] for item in viewer.get("/api/tracker/workflows", **params).json()["items"]
        ]

    assert ids_of(project=project.pk) == list(reversed(ids))
    assert ids_of(agent="bob") == [theirs.pk]
    # The lower-case wire values, as agents send them.
    assert ids_of(profile="complex") == [theirs.pk]
    # `partial` keeps its own status rather than turning into FAILED.
    assert ids_of(status="partial") == [ids[1]]
    assert ids_of(status="failed") == []
    assert ids_of(project=project.pk, status="in_progress", profile="simple") == [
        ids[4],
        ids[3],
        ids[2],
        ids[0],
    ]
    # The upper-case form the answers show names the same values.
    assert ids_of(status="PARTIAL") == [ids[1]]
    assert ids_of(profile="COMPLEX") == [theirs.pk]

    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, object] = {"limit": 2, "project": project.pk}
        if cursor is not None:
            params["cursor"] = cursor
        page = viewer.get("/api/tracker/workflows", **params).json()
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))


def test_workflow_detail_has_phases_progress_and_the_sizes_of_its_lists(viewer, project, agent):
    workflow = begin(project, agent, objective="ship it", total_phases=2, scope="api")
    first = task(project, agent, workflow, "one", phase=1, phase_name="Build")
    task(project, agent, workflow, "two", phase=2)
    tracker.task_complete(
        project=project, agent=agent, task_id=str(first.pk), status="failed", summary="s"
    )
    for progress in (10, 40):
        tracker.milestone_log(
            project=project, agent=agent, task_id=str(first.pk), message="m", progress=progress
        )
    tracker.milestone_log(project=project, agent=agent, task_id=str(first.pk), message="no %")
    blocker(project, agent, first)
    tracker.decision_log(
        project=project,
        agent=agent,
        task_id=str(first.pk),
        category="architecture",
        question="q",
        chosen="c",
        reasoning="r",
    )

    body = viewer.get(f"/api/tracker/workflows/{workflow.pk}").json()
    assert body["objective"] == "ship it"
    assert body["scope"] == "api"
    assert body["total_phases"] == 2
    assert body["progress"] == 40
    assert body["counts"] == {
        "tasks": 2,
        "decisions": 1,
        "issues": 1,
        "open_blockers": 1,
        "milestones": 3,
    }
    assert [(p["number"], p["name"], p["tasks"]) for p in body["phases"]] == [
        (1, "Build", {"total": 1, "completed": 0, "failed": 1, "in_progress": 0}),
        (2, "Phase 2", {"total": 1, "completed": 0, "failed": 0, "in_progress": 1}),
    ]


def test_task_tree_nests_subtasks_with_their_files_changed(viewer, project, agent, tmp_path):
    root = tmp_path / "plain"  # no git: a content snapshot, really compared
    root.mkdir()
    (root / "old.txt").write_text("old\n")
    workflow = begin(project, agent)
    parent = task(project, agent, workflow, "parent", phase=1)
    child = task(project, agent, workflow, "child", parent_task_id=str(parent.pk), root=root)
    grandchild = task(project, agent, workflow, "grandchild", parent_task_id=str(child.pk))
    sibling = task(project, agent, workflow, "sibling", parent_task_id=str(parent.pk))
    later = task(project, agent, workflow, "later", caller_type="subagent", agent_name="helper")
    (root / "new.txt").write_text("new\n")
    (root / "old.txt").write_text("changed\n")
    tracker.task_complete(
        project=project, agent=agent, task_id=str(grandchild.pk), status="success", summary="s"
    )
    tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(child.pk),
        status="success",
        summary="s",
        root=root,
    )

    page = viewer.get(f"/api/tracker/workflows/{workflow.pk}/tasks").json()
    assert page["next_cursor"] is None
    assert [item["name"] for item in page["items"]] == ["later", "parent"]
    newest, top = page["items"]
    assert newest["agent_name"] == "helper"
    assert newest["caller_type"] == "SUBAGENT"
    assert newest["subtasks"] == []
    assert top["phase_number"] == 1
    assert top["parent_task_id"] is None
    assert [sub["name"] for sub in top["subtasks"]] == ["child", "sibling"]
    nested = top["subtasks"][0]
    assert nested["parent_task_id"] == parent.pk
    assert nested["status"] == "SUCCESS"
    assert nested["files_changed"] == {"added": ["new.txt"], "modified": ["old.txt"], "deleted": []}
    assert [sub["id"] for sub in nested["subtasks"]] == [grandchild.pk]
    assert top["subtasks"][1]["id"] == sibling.pk
    assert top["files_changed"] is None  # still running

    first = viewer.get(f"/api/tracker/workflows/{workflow.pk}/tasks", limit=1).json()
    assert [item["id"] for item in first["items"]] == [later.pk]
    rest = viewer.get(
        f"/api/tracker/workflows/{workflow.pk}/tasks", limit=1, cursor=first["next_cursor"]
    ).json()
    assert [item["id"] for item in rest["items"]] == [parent.pk]
    assert rest["next_cursor"] is None


def test_logs_are_paged_and_issues_filter_by_blocker_state(viewer, decider, project, agent):
    workflow = begin(project, agent)
    on = task(project, agent, workflow, agent_name="")
    elsewhere = task(project, agent, begin(project, agent, "other"))
    decisions = [
        tracker.decision_log(
            project=project,
            agent=agent,
            task_id=str(on.pk),
            category="trade_off",
            question=f"q{n}",
            chosen="c",
            reasoning="r",
            options_considered=["a", "b"],
        ).pk
        for n in range(3)
    ]
    milestone = tracker.milestone_log(
        project=project,
        agent=agent,
        task_id=str(on.pk),
        message="half",
        progress=50,
        metadata={"k": 1},
    )
    plain = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(on.pk),
        type="bug_encountered",
        description="d",
        resolution="r",
    )
    answered = blocker(project, agent, on, "answered")
    waiting = blocker(project, agent, on, "waiting")
    blocker(project, agent, elsewhere, "not this workflow's")
    decider.post(f"/api/tracker/issues/{answered.pk}/resolve", {"resolution": "Do A."})

    path = f"/api/tracker/workflows/{workflow.pk}"
    page = viewer.get(f"{path}/decisions", limit=2).json()
    assert [item["id"] for item in page["items"]] == [decisions[2], decisions[1]]
    item = page["items"][0]
    assert item["task_id"] == on.pk
    assert item["task_name"] == "t"
    assert item["agent_name"] == agent.agent_id
    assert item["category"] == "TRADE_OFF"
    assert item["options_considered"] == ["a", "b"]
    rest = viewer.get(f"{path}/decisions", limit=2, cursor=page["next_cursor"]).json()
    assert [item["id"] for item in rest["items"]] == [decisions[0]]
    assert rest["next_cursor"] is None

    [mile] = viewer.get(f"{path}/milestones").json()["items"]
    assert (mile["id"], mile["message"], mile["progress"], mile["metadata"]) == (
        milestone.pk,
        "half",
        50,
        {"k": 1},
    )

    def issue_ids(**params: object) -> list[int]:
        return [item["id"] for item in viewer.get(f"{path}/issues", **params).json()["items"]]

    assert issue_ids() == [waiting.pk, answered.pk, plain.pk]
    assert issue_ids(blockers="open") == [waiting.pk]
    assert issue_ids(blockers="resolved") == [answered.pk]
    [resolved] = viewer.get(f"{path}/issues", blockers="resolved").json()["items"]
    assert resolved["human_resolution"] == "Do A."
    assert resolved["resolved_by"] == "ada"
    assert resolved["type"] == "UNCLEAR_REQUIREMENT"


# A constant number of queries per list, however many rows


def test_workflow_list_query_count_is_constant(viewer, project, agent, django_assert_num_queries):
    viewer.get("/api/tracker/workflows")
    for n in range(2):
        begin(project, agent, f"w{n}")
    # Authentication, then one query for the page (project and agent joined).
    with django_assert_num_queries(AUTH_QUERIES + 1):
        assert len(viewer.get("/api/tracker/workflows").json()["items"]) == 2
    for n in range(18):
        begin(project, agent_ensure(project=project, agent_id=f"a{n}"), f"x{n}")
    with django_assert_num_queries(AUTH_QUERIES + 1):
        page = viewer.get("/api/tracker/workflows", limit=20).json()
    assert len(page["items"]) == 20
    with django_assert_num_queries(AUTH_QUERIES + 1):
        viewer.get("/api/tracker/workflows", limit=5, cursor=page["items"][3]["id"], agent="a1")


def test_workflow_detail_query_count_is_constant(viewer, project, agent, django_assert_num_queries):
    workflow = begin(project, agent, total_phases=20)
    viewer.get(f"/api/tracker/workflows/{workflow.pk}")

    def grow(phases: range) -> None:
        for number in phases:
            on = task(project, agent, workflow, phase=number)
            blocker(project, agent, on)
            tracker.milestone_log(
                project=project, agent=agent, task_id=str(on.pk), message="m", progress=number
            )

    grow(range(1, 3))
    # Authentication, then the workflow with its list sizes and progress (1), its phases
    # with their task counts (1).
    with django_assert_num_queries(AUTH_QUERIES + 2):
        assert len(viewer.get(f"/api/tracker/workflows/{workflow.pk}").json()["phases"]) == 2
    grow(range(3, 21))
    with django_assert_num_queries(AUTH_QUERIES + 2):
        body = viewer.get(f"/api/tracker/workflows/{workflow.pk}").json()
    assert len(body["phases"]) == 20
    assert body["counts"]["open_blockers"] == 20


def test_task_tree_query_count_grows_with_depth_not_rows(
    viewer, project, agent, django_assert_num_queries
):
    workflow = begin(project, agent)
    path = f"/api/tracker/workflows/{workflow.pk}/tasks"
    viewer.get(path)

    def grow(count: int) -> None:
        for n in range(count):
            top = task(project, agent, workflow, f"top{n}")
            sub = task(project, agent, workflow, f"sub{n}", parent_task_id=str(top.pk))
            task(project, agent, workflow, f"leaf{n}", parent_task_id=str(sub.pk))

    grow(2)
    # Authentication, the workflow (1), the top-level page (1), then one query per level of
    # nesting: sub-tasks (1), their sub-tasks (1), and the empty level below (1).
    with django_assert_num_queries(AUTH_QUERIES + 5):
        assert len(viewer.get(path).json()["items"]) == 2
    grow(18)
    with django_assert_num_queries(AUTH_QUERIES + 5):
        page = viewer.get(path, limit=20).json()
    assert len(page["items"]) == 20
    assert all(len(item["subtasks"][0]["subtasks"]) == 1 for item in page["items"])


def test_subtasks_are_paged_under_each_task_and_on_their_own(viewer, project, agent):
    workflow = begin(project, agent)
    parent = task(project, agent, workflow, "parent")
    children = [
        task(project, agent, workflow, f"child{n}", parent_task_id=str(parent.pk)).pk
        for n in range(5)
    ]
    leaves = [
        task(project, agent, workflow, f"leaf{n}", parent_task_id=str(children[0])).pk
        for n in range(3)
    ]
    alone = task(project, agent, workflow, "alone")

    page = viewer.get(f"/api/tracker/workflows/{workflow.pk}/tasks", subtask_limit=2).json()
    by_name = {item["name"]: item for item in page["items"]}
    top = by_name["parent"]
    assert [sub["id"] for sub in top["subtasks"]] == children[:2]
    assert top["subtasks_count"] == 5
    assert top["subtasks_next_cursor"] == children[1]
    first = top["subtasks"][0]
    assert [sub["id"] for sub in first["subtasks"]] == leaves[:2]
    assert (first["subtasks_count"], first["subtasks_next_cursor"]) == (3, leaves[1])
    assert top["subtasks"][1]["subtasks"] == []
    assert (top["subtasks"][1]["subtasks_count"], top["subtasks"][1]["subtasks_next_cursor"]) == (
        0,
        None,
    )
    assert (by_name["alone"]["subtasks_count"], by_name["alone"]["subtasks_next_cursor"]) == (
        0,
        None,
    )
    # The default shows them all here.
    full = viewer.get(f"/api/tracker/workflows/{workflow.pk}/tasks").json()["items"]
    [top] = [item for item in full if item["id"] == parent.pk]
    assert [sub["id"] for sub in top["subtasks"]] == children
    assert top["subtasks_next_cursor"] is None
    assert alone.pk in [item["id"] for item in full]

    # The rest, page by page, from the task's cursor.
    path = f"/api/tracker/tasks/{parent.pk}/subtasks"
    seen = children[:2]
    cursor = children[1]
    while cursor is not None:
        more = viewer.get(path, cursor=cursor, limit=2, subtask_limit=1).json()
        seen += [item["id"] for item in more["items"]]
        cursor = more["next_cursor"]
    assert seen == children
    whole = viewer.get(path, subtask_limit=1).json()
    assert [item["id"] for item in whole["items"]] == children
    assert whole["next_cursor"] is None
    assert [sub["id"] for sub in whole["items"][0]["subtasks"]] == leaves[:1]
    assert whole["items"][0]["subtasks_next_cursor"] == leaves[0]

    missing = alone.pk + 1000
    error = assert_error(viewer.get(f"/api/tracker/tasks/{missing}/subtasks"), 404, "not_found")
    assert f"task {missing}" in error["message"]
    for name, bad in [("limit", 0), ("subtask_limit", 201), ("cursor", -1)]:
        error = assert_error(viewer.get(path, **{name: bad}), 400, "invalid_request")
        assert error["details"][0]["loc"] == ["query", name]


def test_subtask_pages_cost_the_same_however_many_subtasks(
    viewer, project, agent, django_assert_num_queries
):
    workflow = begin(project, agent)
    parent = task(project, agent, workflow, "parent")
    tree = f"/api/tracker/workflows/{workflow.pk}/tasks"
    subtasks = f"/api/tracker/tasks/{parent.pk}/subtasks"
    viewer.get(tree)

    def grow(count: int) -> None:
        for n in range(count):
            child = task(project, agent, workflow, f"c{n}", parent_task_id=str(parent.pk))
            for m in range(2):
                task(project, agent, workflow, f"l{n}.{m}", parent_task_id=str(child.pk))

    grow(2)
    # Authentication, the workflow (1), the top-level page (1), then one query per level
    # below it (sub-tasks, their sub-tasks, the empty level below).
    with django_assert_num_queries(AUTH_QUERIES + 5):
        assert viewer.get(tree, subtask_limit=5).json()["items"][0]["subtasks_count"] == 2
    # Authentication, the task (1), its page (1), then the levels below (2).
    with django_assert_num_queries(AUTH_QUERIES + 4):
        assert len(viewer.get(subtasks).json()["items"]) == 2
    grow(18)
    with django_assert_num_queries(AUTH_QUERIES + 5):
        [top] = viewer.get(tree, subtask_limit=5).json()["items"]
    assert (len(top["subtasks"]), top["subtasks_count"]) == (5, 20)
    with django_assert_num_queries(AUTH_QUERIES + 4):
        page = viewer.get(subtasks, limit=20, subtask_limit=1).json()
    assert len(page["items"]) == 20
    assert all(item["subtasks_count"] == 2 for item in page["items"])


@pytest.mark.parametrize("kind", ["decisions", "issues", "milestones"])
def test_log_list_query_count_is_constant(
    kind, viewer, decider, project, agent, django_assert_num_queries
):
    workflow = begin(project, agent)
    path = f"/api/tracker/workflows/{workflow.pk}/{kind}"
    viewer.get(path)

    def grow(count: int) -> None:
        # Each row on a task of its own, half of the issues answered by a person.
        for n in range(count):
            on = task(project, agent, workflow, f"t{n}", agent_name=f"helper{n}")
            if kind == "decisions":
                tracker.decision_log(
                    project=project,
                    agent=agent,
                    task_id=str(on.pk),
                    category="other",
                    question="q",
                    chosen="c",
                    reasoning="r",
                )
            elif kind == "milestones":
                tracker.milestone_log(project=project, agent=agent, task_id=str(on.pk), message="m")
            else:
                issue = blocker(project, agent, on)
                if n % 2:
                    tracker.blocker_resolve(
                        issue_id=issue.pk, by=decider.user, resolution="r", via="dashboard"
                    )

    grow(2)
    # Authentication, the workflow (1), then one query for the page (task, its agent and
    # who resolved an issue joined).
    with django_assert_num_queries(AUTH_QUERIES + 2):
        assert len(viewer.get(path).json()["items"]) == 2
    grow(18)
    with django_assert_num_queries(AUTH_QUERIES + 2):
        page = viewer.get(path, limit=20).json()
    assert len(page["items"]) == 20
    with django_assert_num_queries(AUTH_QUERIES + 2):
        viewer.get(path, limit=5, cursor=page["next_cursor"] or page["items"][-1]["id"])


# Resolving a blocker


def test_resolve_a_blocker_once_and_the_agent_sees_who_and_when(decider, project, agent):
    workflow = begin(project, agent)
    on = task(project, agent, workflow)
    issue = blocker(project, agent, on)
    path = f"/api/tracker/issues/{issue.pk}/resolve"

    response = decider.post(path, {"resolution": "Use the JSON format."})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] == issue.pk
    assert body["human_resolution"] == "Use the JSON format."
    assert body["resolved_by"] == "ada"
    resolved_at = datetime.fromisoformat(body["resolved_at"])

    error = assert_error(decider.post(path, {"resolution": "Something else."}), 409, "conflict")
    assert "already resolved by ada" in error["message"]
    issue.refresh_from_db()
    assert issue.human_resolution == "Use the JSON format."
    assert Event.objects.filter(kind="issue:updated").count() == 1

    # What the agent's next get_context says.
    context = context_get(project=project, workflow_id=str(workflow.pk), include=["blockers"])
    assert context["blockers"] == []
    assert context["has_blockers"] is False
    [seen] = context["resolved_blockers"]
    assert seen["id"] == str(issue.pk)
    assert seen["human_resolution"] == "Use the JSON format."
    assert seen["resolved_by"] == "ada"
    assert seen["resolved_at"] == issue.resolved_at.isoformat()
    # The REST answer renders the same moment to the millisecond.
    assert abs(datetime.fromisoformat(seen["resolved_at"]) - resolved_at) < timedelta(
        milliseconds=1
    )


def test_resolving_a_blocker_is_the_trackers_permission_not_a_review_ruling(
    make_caller, project, agent
):
    issue = blocker(project, agent, task(project, agent, begin(project, agent)))
    path = f"/api/tracker/issues/{issue.pk}/resolve"
    reviewer = make_caller(VIEW, DECIDE, username="rita")
    error = assert_error(reviewer.post(path, {"resolution": "r"}), 403, "forbidden")
    assert RESOLVE_BLOCKER in error["message"]
    issue.refresh_from_db()
    assert issue.resolved_at is None
    answerer = make_caller(VIEW, RESOLVE_BLOCKER, username="abe")
    assert answerer.post(path, {"resolution": "r"}).status_code == 201


def test_resolve_refuses_bad_resolutions_and_non_blockers_changing_nothing(
    decider, project, agent, settings
):
    workflow = begin(project, agent)
    on = task(project, agent, workflow)
    issue = blocker(project, agent, on)
    path = f"/api/tracker/issues/{issue.pk}/resolve"

    # Declared in the schema, so refused before the service is called.
    for bad in ("", "   \n", "a\x00b", "a\x07b"):
        error = assert_error(decider.post(path, {"resolution": bad}), 400, "invalid_request")
        assert error["details"][0]["loc"] == ["body", "body", "resolution"]
    error = assert_error(decider.post(path, {}), 400, "invalid_request")
    assert error["details"][0]["loc"] == ["body", "body", "resolution"]

    # Over the services' limit for a text (the request itself stays under the body limit).
    from workflows import limits

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = limits.TRACKER_TEXT.max_chars * 2
    over = "x" * (limits.TRACKER_TEXT.max_chars + 1)
    error = assert_error(decider.post(path, {"resolution": over}), 400, "invalid_input")
    assert "resolution" in error["message"]
    assert f"{limits.TRACKER_TEXT.max_chars:,}" in error["message"]

    plain = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(on.pk),
        type="bug_encountered",
        description="d",
        resolution="r",
    )
    error = assert_error(
        decider.post(f"/api/tracker/issues/{plain.pk}/resolve", {"resolution": "ok"}),
        400,
        "invalid_input",
    )
    assert "does not require human review" in error["message"]

    issue.refresh_from_db()
    assert (issue.human_resolution, issue.resolved_by, issue.resolved_at) == ("", None, None)
    assert not Event.objects.filter(kind="issue:updated").exists()


def test_tracker_operations_are_in_the_openapi_document(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert set(paths["/api/tracker/workflows/{workflow_id}/tasks"]) == {"get"}
    assert set(paths["/api/tracker/issues/{issue_id}/resolve"]) == {"post"}
    assert paths["/api/tracker/issues/{issue_id}/resolve"]["post"]["operationId"] == (
        "resolve_blocker"
    )
