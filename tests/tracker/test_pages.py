"""The tracker's dashboard pages: the list of tracked workflows, one workflow's page,
and a person's written answer to a blocker, with the same login, permissions, live region,
keyset pages and bad-input handling as the session pages."""

from __future__ import annotations

import html as html_lib
import re

import pytest

from tests.dashboard.conftest import client_for
from tests.dashboard.test_pages import attr, tagged
from tests.support.factories import make_user
from tracker import services as tracker
from tracker.models import Issue, Task, TrackedWorkflow
from tracker.selectors import context_get
from workflows.models import Agent, Event, Project
from workflows.services.agents import agent_ensure
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db

AUTH = 4  # session, user, user permissions, group permissions
LIVE_AFTER = 1  # the newest event id


def begin(project: Project, agent: Agent, name: str = "w", **extra: object) -> TrackedWorkflow:
    return tracker.tracked_workflow_start(project=project, agent=agent, name=name, **extra)


def task(
    project: Project, agent: Agent, workflow: TrackedWorkflow, name: str = "t", **extra: object
) -> Task:
    return tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name=name, goal="g", **extra
    ).task


def blocker(project: Project, agent: Agent, on: Task, description: str = "Which format?") -> Issue:
    return tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(on.pk),
        type="unclear_requirement",
        description=description,
        resolution="asked",
        requires_human_review=True,
    )


def rows(html: str, testid: str, name: str) -> list[str]:
    return [attr(tag, name) for tag in tagged(html, testid)]


def filter_errors(html: str) -> str:
    [errors] = re.findall(r'<ul[^>]*data-testid="filter-errors".*?</ul>', html, re.S)
    return html_lib.unescape(errors)


def flashes(client, url: str) -> str:
    return html_lib.unescape(client.get(url).content.decode())


# The list


def test_list_filters_by_project_status_profile_and_agent(watching, project, agent, tmp_path):
    other = project_ensure(root_path=tmp_path / "elsewhere")
    bob = agent_ensure(project=other, agent_id="bob")
    mine = [begin(project, agent, f"w{n}", profile="simple").pk for n in range(3)]
    theirs = begin(other, bob, "theirs", profile="complex").pk
    tracker.tracked_workflow_complete(
        project=project, agent=agent, workflow_id=str(mine[1]), status="partial", summary="s"
    )

    def listed(query: str = "") -> list[int]:
        html = watching.get(f"/tracker/{query}").content.decode()
        assert 'data-testid="filter-errors"' not in html, query
        return [int(i) for i in rows(html, "tracked-row", "data-workflow-id")]

    assert listed() == [theirs, mine[2], mine[1], mine[0]]
    assert listed(f"?project={project.pk}") == [mine[2], mine[1], mine[0]]
    # The wire values; `partial` keeps its own status.
    assert listed("?status=partial") == [mine[1]]
    assert listed("?status=in_progress&profile=simple") == [mine[2], mine[0]]
    assert listed("?profile=complex") == [theirs]
    assert listed("?agent=bob") == [theirs]
    assert listed(f"?project={project.pk + 1000}") == []
    html = watching.get("/tracker/?status=partial").content.decode()
    assert rows(html, "tracked-row", "data-status") == ["partial"]
    # Listening to the filtered project's events only.
    assert (
        f'data-live-project="{project.pk}"'
        in watching.get(f"/tracker/?project={project.pk}").content.decode()
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=PARTIALLY", "status: Select a valid choice."),
        ("status=In_Progress", "status: Select a valid choice."),
        ("profile=huge", "profile: Select a valid choice."),
        ("project=0", "project: Ensure this value is greater than or equal to 1."),
        ("project=seven", "project: Enter a whole number."),
        (f"before={2**63}", "before: Ensure this value is less than or equal to"),
        ("after=1.5", "after: Enter a whole number."),
        ("agent=" + "a" * 129, "agent: Ensure this value has at most 128 characters"),
    ],
)
def test_a_bad_filter_is_shown_and_left_out(watching, project, agent, query, message):
    ids = [begin(project, agent, f"w{n}").pk for n in range(2)]
    response = watching.get(f"/tracker/?{query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert message in filter_errors(html)
    assert [int(i) for i in rows(html, "tracked-row", "data-workflow-id")] == ids[::-1]


def test_list_pages_by_keyset_both_ways(watching, project, agent, monkeypatch):
    from dashboard import tracker_views

    monkeypatch.setattr(tracker_views, "WORKFLOWS_PER_PAGE", 2)
    newest_first = [begin(project, agent, f"w{n}").pk for n in range(5)][::-1]

    def page(query: str = ""):
        html = watching.get(f"/tracker/{query}").content.decode()
        links = {
            name: attr(found[0], "href").replace("&amp;", "&") if found else None
            for name in ("next-page", "prev-page")
            for found in [tagged(html, name)]
        }
        listed = [int(i) for i in rows(html, "tracked-row", "data-workflow-id")]
        return listed, links["next-page"], links["prev-page"]

    listed, older, newer = page()
    assert (listed, newer) == (newest_first[:2], None)
    listed, older, newer = page(older)
    assert listed == newest_first[2:4]
    listed, last, _ = page(older)
    assert (listed, last) == (newest_first[4:], None)
    listed, _, newer = page(newer)
    assert listed == newest_first[:2]
    assert newer is None


# The workflow page


def test_workflow_page_shows_phases_tree_files_logs_and_blockers(
    watching, project, agent, tmp_path
):
    root = tmp_path / "plain"  # no git: a content snapshot, really compared
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "old.py").write_text("old\n")
    (root / "gone.txt").write_text("bye\n")
    workflow = begin(project, agent, "Ship it", objective="Ship the thing", total_phases=2)
    parent = task(project, agent, workflow, "parent", phase=1, phase_name="Build")
    child = task(
        project,
        agent,
        workflow,
        "child",
        parent_task_id=str(parent.pk),
        root=root,
        areas=["src/"],
    )
    grandchild = task(project, agent, workflow, "grandchild", parent_task_id=str(child.pk))
    (root / "src" / "new.py").write_text("new\n")
    (root / "src" / "old.py").write_text("changed\n")
    (root / "gone.txt").unlink()
    tracker.task_complete(
        project=project, agent=agent, task_id=str(grandchild.pk), status="success", summary="s"
    )
    tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(child.pk),
        status="partial_success",
        summary="Most of it",
        root=root,
    )
    later = task(project, agent, workflow, "later", phase=2, phase_name="Check")
    tracker.decision_log(
        project=project,
        agent=agent,
        task_id=str(parent.pk),
        category="library_choice",
        question="Which parser?",
        chosen="ruamel",
        reasoning="Keeps comments",
        options_considered=["pyyaml", "ruamel"],
    )
    tracker.milestone_log(
        project=project, agent=agent, task_id=str(later.pk), message="Halfway", progress=55
    )
    plain = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(parent.pk),
        type="bug_encountered",
        description="Flaky test",
        resolution="Retried",
    )
    waiting = blocker(project, agent, later, "Which <format>?")

    response = watching.get(f"/tracker/{workflow.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-live-project="{project.pk}"' in html
    assert rows(html, "phase", "data-number") == ["1", "2"]
    assert rows(html, "phase", "data-status") == ["in_progress", "in_progress"]
    assert "Build" in html
    assert "Check" in html
    # The tree: top-level tasks newest first, sub-tasks nested below their parent.
    assert rows(html, "task", "data-task-id") == [
        str(later.pk),
        str(parent.pk),
        str(child.pk),
        str(grandchild.pk),
    ]
    tree = html[html.index('data-testid="task-tree"') :]
    parent_part = tree[tree.index(f'id="task-{parent.pk}"') :]
    assert parent_part.index(f'id="task-{child.pk}"') < parent_part.index(
        f'id="task-{grandchild.pk}"'
    )
    assert rows(html, "task", "data-status")[2] == "partial_success"
    child_part = tree[
        tree.index(f'id="task-{child.pk}"') : tree.index(f'id="task-{grandchild.pk}"')
    ]
    assert re.search(r'data-testid="file-added".*src/new\.py', child_part)
    assert re.search(r'data-testid="file-modified".*src/old\.py', child_part)
    assert re.search(r'data-testid="file-deleted".*gone\.txt', child_part)
    unexpected = html_lib.unescape(tagged_text(child_part, "unexpected-files"))
    assert "gone.txt" in unexpected
    assert "src/" in unexpected
    # The files outside the areas are said once, in their list, not again as a warning.
    child.refresh_from_db()
    assert "changed outside the declared areas" in child.warnings[-1]
    assert "changed outside the declared areas" not in child_part
    # Logs.
    assert rows(html, "tracked-decision-row", "data-decision-id") != []
    assert "ruamel" in html
    assert "Keeps comments" in html
    assert tagged_text(html, "milestone-progress") == "55%"
    assert "Halfway" in html
    assert rows(html, "issue-row", "data-blocker") == ["open", "no"]
    assert rows(html, "issue-row", "data-issue-id") == [str(waiting.pk), str(plain.pk)]
    # The blocker panel, escaped; a watcher sees no form.
    assert rows(html, "blocker", "data-issue-id") == [str(waiting.pk)]
    assert "Which &lt;format&gt;?" in html
    assert not tagged(html, "resolve-form")
    # The live fragment is the region alone.
    fragment = watching.get(f"/tracker/{workflow.pk}/", headers={"X-Live-Fragment": "1"})
    assert fragment["X-Live-Fragment"] == "1"
    assert "<html" not in fragment.content.decode()
    assert tagged(fragment.content.decode(), "blocker")


def tagged_text(html: str, testid: str) -> str:
    match = re.search(rf'<(\w+)[^>]*data-testid="{testid}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, testid
    return match.group(2)


def test_each_list_of_the_workflow_page_pages_on_its_own(watching, project, agent, monkeypatch):
    from dashboard import tracker_views

    monkeypatch.setattr(tracker_views, "LOGS_PER_PAGE", 2)
    monkeypatch.setattr(tracker_views, "TASKS_PER_PAGE", 2)
    workflow = begin(project, agent)
    tasks = [task(project, agent, workflow, f"t{n}") for n in range(3)]
    milestones = [
        tracker.milestone_log(
            project=project, agent=agent, task_id=str(tasks[0].pk), message=f"m{n}"
        )
        for n in range(3)
    ]
    url = f"/tracker/{workflow.pk}/"
    html = watching.get(url).content.decode()
    assert rows(html, "task", "data-task-id") == [str(tasks[2].pk), str(tasks[1].pk)]
    assert rows(html, "milestone-row", "data-milestone-id") == [
        str(milestones[2].pk),
        str(milestones[1].pk),
    ]
    older = attr(tagged(html, "milestones-older")[0], "href").replace("&amp;", "&")
    html = watching.get(url + older).content.decode()
    assert rows(html, "milestone-row", "data-milestone-id") == [str(milestones[0].pk)]
    # The other lists stay on their first page.
    assert rows(html, "task", "data-task-id") == [str(tasks[2].pk), str(tasks[1].pk)]
    html = watching.get(url + f"?tasks={tasks[1].pk}").content.decode()
    assert rows(html, "task", "data-task-id") == [str(tasks[0].pk)]
    # A cursor the pager never handed out is shown and left out.
    html = watching.get(url + "?tasks=abc&milestones=0").content.decode()
    errors = filter_errors(html)
    assert "tasks: Enter a whole number." in errors
    assert "milestones: Ensure this value is greater than or equal to 1." in errors
    assert rows(html, "task", "data-task-id") == [str(tasks[2].pk), str(tasks[1].pk)]


def test_subtasks_beyond_the_first_page_continue_on_the_task_page(
    watching, project, agent, monkeypatch
):
    from dashboard import tracker_views

    monkeypatch.setattr(tracker_views, "SUBTASKS_PER_TASK", 2)
    workflow = begin(project, agent)
    parent = task(project, agent, workflow, "parent")
    children = [
        task(project, agent, workflow, f"c{n}", parent_task_id=str(parent.pk)).pk for n in range(5)
    ]
    leaves = [
        task(project, agent, workflow, f"leaf{n}", parent_task_id=str(children[2])).pk
        for n in range(3)
    ]
    html = watching.get(f"/tracker/{workflow.pk}/").content.decode()
    assert rows(html, "task", "data-task-id") == [str(i) for i in [parent.pk, *children[:2]]]
    assert "5 sub-tasks in all" in html_lib.unescape(tagged_text(html, "more-subtasks"))
    link = attr(tagged(html, "more-subtasks-link")[0], "href").replace("&amp;", "&")
    assert link == f"/tracker/{workflow.pk}/tasks/{parent.pk}/?after={children[1]}"

    # The task page goes on from there, each sub-task with the first of its own.
    html = watching.get(link).content.decode()
    assert rows(html, "task", "data-task-id") == [
        str(i) for i in [parent.pk, children[2], *leaves[:2], children[3]]
    ]
    links = [attr(t, "href").replace("&amp;", "&") for t in tagged(html, "more-subtasks-link")]
    assert links == [
        f"/tracker/{workflow.pk}/tasks/{children[2]}/?after={leaves[1]}",
        f"/tracker/{workflow.pk}/tasks/{parent.pk}/?after={children[3]}",
    ]
    html = watching.get(links[1]).content.decode()
    assert rows(html, "task", "data-task-id") == [str(parent.pk), str(children[4])]
    assert not tagged(html, "more-subtasks-link")
    html = watching.get(links[0]).content.decode()
    assert rows(html, "task", "data-task-id") == [str(children[2]), str(leaves[2])]

    # A bad cursor is shown and the first page is shown; another workflow's task is not here.
    html = watching.get(f"/tracker/{workflow.pk}/tasks/{parent.pk}/?after=x").content.decode()
    assert "after: Enter a whole number." in filter_errors(html)
    assert rows(html, "task", "data-task-id")[:3] == [str(parent.pk), *map(str, children[:2])]
    other = begin(project, agent, "other")
    assert watching.get(f"/tracker/{other.pk}/tasks/{parent.pk}/").status_code == 404
    assert watching.get(f"/tracker/{workflow.pk}/tasks/{leaves[2] + 100}/").status_code == 404
    assert watching.get(f"/tracker/{workflow.pk}/tasks/{2**64}/").status_code == 404


def test_task_page_query_count_is_constant(
    watching, project, agent, django_assert_num_queries, monkeypatch
):
    from dashboard import tracker_views

    monkeypatch.setattr(tracker_views, "SUBTASKS_PER_TASK", 20)
    workflow = begin(project, agent)
    parent = task(project, agent, workflow, "parent")
    url = f"/tracker/{workflow.pk}/tasks/{parent.pk}/"

    def grow(count: int) -> None:
        for n in range(count):
            child = task(project, agent, workflow, f"c{n}", parent_task_id=str(parent.pk))
            task(project, agent, workflow, f"l{n}", parent_task_id=str(child.pk))

    grow(2)
    # auth, newest event id, the task with its workflow, its sub-task page, their number,
    # each level below them (leaves, the empty level below)
    expected = AUTH + LIVE_AFTER + 3 + 2
    with django_assert_num_queries(expected):
        assert len(tagged(watching.get(url).content.decode(), "task")) == 1 + 2 * 2
    grow(30)
    with django_assert_num_queries(expected):
        html = watching.get(url).content.decode()
    assert len(tagged(html, "task")) == 1 + 20 * 2
    assert tagged(html, "more-subtasks-link")


@pytest.mark.parametrize("path", ["/tracker/424242/", f"/tracker/{2**64}/", "/tracker/abc/"])
def test_an_unknown_workflow_is_404(watching, path):
    assert watching.get(path).status_code == 404


# Resolving a blocker


def test_a_decider_resolves_a_blocker_and_the_agent_sees_who_and_when(decider, project, agent):
    deciding = client_for(decider, enforce_csrf=True)
    workflow = begin(project, agent)
    issue = blocker(project, agent, task(project, agent, workflow))
    url = f"/tracker/{workflow.pk}/"
    html = deciding.get(url).content.decode()
    [form] = tagged(html, "resolve-form")
    action = attr(form, "action")
    assert action == f"/tracker/{workflow.pk}/blockers/{issue.pk}/resolve/"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)

    # Without the CSRF token: refused, nothing changes.
    assert deciding.post(action, {"resolution": "Use JSON."}).status_code == 403
    issue.refresh_from_db()
    assert issue.resolved_at is None

    response = deciding.post(
        action, {"resolution": "  Use JSON.\nNot YAML.  ", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert response["Location"] == f"{url}#blockers"
    issue.refresh_from_db()
    assert issue.human_resolution == "Use JSON.\nNot YAML."
    assert (issue.resolved_by, issue.resolved_via) == (decider, "dashboard")
    page = flashes(deciding, url)
    assert f"Blocker {issue.pk} resolved" in page
    assert not tagged(page, "blocker")
    assert tagged(page, "no-blockers")
    assert "Use JSON." in tagged_text(page, "human-resolution")
    assert "dana via dashboard" in tagged_text(page, "resolved-by")
    assert Event.objects.filter(kind="issue:updated").count() == 1

    context = context_get(project=project, workflow_id=str(workflow.pk), include=["blockers"])
    assert context["blockers"] == []
    [seen] = context["resolved_blockers"]
    assert (seen["id"], seen["resolved_by"]) == (str(issue.pk), "dana")
    assert seen["resolved_at"] == issue.resolved_at.isoformat()

    # Once only: a second answer is refused with who answered, and changes nothing.
    deciding.post(action, {"resolution": "Something else", "csrfmiddlewaretoken": token})
    assert "already resolved by dana" in flashes(deciding, url)
    issue.refresh_from_db()
    assert issue.human_resolution == "Use JSON.\nNot YAML."
    assert Event.objects.filter(kind="issue:updated").count() == 1


@pytest.mark.parametrize(
    ("resolution", "message"),
    [
        ("", "A written resolution is required"),
        ("   \n\t  ", "A written resolution is required"),
        (None, "A written resolution is required"),
        ("use\x00this", "resolution: Null characters are not allowed."),
        ("use\x07this", "resolution contains the control character U+0007 at position 3"),
    ],
)
def test_an_empty_or_bad_resolution_is_refused_and_changes_nothing(
    deciding, project, agent, resolution, message
):
    workflow = begin(project, agent)
    issue = blocker(project, agent, task(project, agent, workflow))
    data = {} if resolution is None else {"resolution": resolution}
    response = deciding.post(f"/tracker/{workflow.pk}/blockers/{issue.pk}/resolve/", data)
    assert response.status_code == 302
    page = flashes(deciding, f"/tracker/{workflow.pk}/")
    assert message in page
    assert rows(page, "blocker", "data-issue-id") == [str(issue.pk)]
    issue.refresh_from_db()
    assert (issue.human_resolution, issue.resolved_by, issue.resolved_at) == ("", None, None)
    assert not Event.objects.filter(kind="issue:updated").exists()


def test_resolving_refuses_what_is_no_blocker_of_this_workflow(deciding, project, agent):
    workflow = begin(project, agent)
    on = task(project, agent, workflow)
    issue = blocker(project, agent, on)
    other = begin(project, agent, "other")
    plain = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(on.pk),
        type="other",
        description="d",
        resolution="r",
    )

    def post(workflow_id: int, issue_id: int) -> int:
        path = f"/tracker/{workflow_id}/blockers/{issue_id}/resolve/"
        return deciding.post(path, {"resolution": "ok"}).status_code

    # Another workflow's issue, an unknown issue, an unknown workflow: not found.
    assert post(other.pk, issue.pk) == 404
    assert post(workflow.pk, issue.pk + 1000) == 404
    assert post(workflow.pk + 1000, issue.pk) == 404
    assert post(workflow.pk, 2**64) == 404
    # An issue that needs no person: refused with the service's message.
    assert post(workflow.pk, plain.pk) == 302
    assert "does not require human review" in flashes(deciding, f"/tracker/{workflow.pk}/")
    assert deciding.get(f"/tracker/{workflow.pk}/blockers/{issue.pk}/resolve/").status_code == 405
    assert not Issue.objects.filter(resolved_at__isnull=False).exists()
    assert not Event.objects.filter(kind="issue:updated").exists()


# Who may see and do what


def test_access_to_the_tracker_pages(client, watching, nobody, project, agent):
    workflow = begin(project, agent)
    issue = blocker(project, agent, task(project, agent, workflow))
    pages = [
        "/tracker/",
        f"/tracker/{workflow.pk}/",
        f"/tracker/{workflow.pk}/tasks/{issue.task_id}/",
    ]
    resolve = f"/tracker/{workflow.pk}/blockers/{issue.pk}/resolve/"
    for n, url in enumerate(pages):
        for headers in ({}, {"X-Live-Fragment": "1"}):
            response = client.get(url, headers=headers)
            assert response.status_code == 302
            assert response["Location"].startswith("/login/?next=")
            assert "X-Live-Fragment" not in response
        assert client_for(nobody).get(url).status_code == 403
        only_view = make_user(username=f"solo{n}", perms=("workflows.view_workflowsession",))
        assert client_for(only_view).get(url).status_code == 200
    assert client.post(resolve, {"resolution": "r"}).status_code == 302
    assert client_for(nobody).post(resolve, {"resolution": "r"}).status_code == 403
    # Watching is not deciding: no form, and a POST is refused.
    assert not tagged(watching.get(pages[1]).content.decode(), "resolve-form")
    response = watching.post(resolve, {"resolution": "r"})
    assert response.status_code == 403
    assert "tracker.resolve_blocker" in response.content.decode()
    issue.refresh_from_db()
    assert issue.resolved_at is None
    assert not Event.objects.filter(kind="issue:updated").exists()


def test_phases_done_counts_finished_phases_not_the_one_in_progress(watching, project, agent):
    workflow = begin(project, agent, "Three phases", total_phases=3)
    first = tracker.phase_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), number=1, name="Plan"
    )
    tracker.phase_complete(project=project, agent=agent, phase_id=str(first.phase.pk))
    tracker.phase_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), number=2, name="Build"
    )
    # The workflow is on phase 2, with one phase of three finished.
    page = watching.get(f"/tracker/{workflow.pk}/").content.decode()
    assert tagged_text(page, "phases-done") == "1 of 3 done"
    listed = watching.get("/tracker/").content.decode()
    assert tagged_text(listed, "phases-done") == "1/3"


def test_nav_and_overview_show_tracked_work(watching, project, agent):
    running = begin(project, agent, "Running one")
    done = begin(project, agent, "Done one")
    tracker.tracked_workflow_complete(
        project=project, agent=agent, workflow_id=str(done.pk), status="completed", summary="s"
    )
    blocker(project, agent, task(project, agent, running))
    html = watching.get("/").content.decode()
    assert 'id="nav-tracker" href="/tracker/"' in html
    section = html[html.index('data-testid="tracked-in-progress"') :]
    assert rows(section, "tracked-row", "data-workflow-id") == [str(running.pk)]
    assert tagged_text(section, "open-blockers") == "1 open"
    tracker_page = watching.get("/tracker/").content.decode()
    assert 'id="nav-tracker" href="/tracker/" aria-current="page"' in tracker_page


# A constant number of queries, however many rows


def test_list_query_count_is_constant(watching, project, agent, django_assert_num_queries):
    def grow(count: int) -> None:
        for n in range(count):
            workflow = begin(project, agent_ensure(project=project, agent_id=f"a{n}"), f"w{n}")
            on = task(project, agent, workflow)
            blocker(project, agent, on)
            tracker.milestone_log(
                project=project, agent=agent, task_id=str(on.pk), message="m", progress=n
            )

    grow(2)
    # auth, newest event id, the page (with its counts and progress), the projects
    expected = AUTH + LIVE_AFTER + 2
    with django_assert_num_queries(expected):
        assert len(tagged(watching.get("/tracker/").content.decode(), "tracked-row")) == 2
    grow(18)
    with django_assert_num_queries(expected):
        html = watching.get("/tracker/?status=in_progress").content.decode()
    assert len(tagged(html, "tracked-row")) == 20
    with django_assert_num_queries(expected):
        watching.get("/tracker/", headers={"X-Live-Fragment": "1"})


def test_workflow_page_query_count_is_constant(
    deciding, decider, project, agent, django_assert_num_queries, tmp_path
):
    workflow = begin(project, agent, total_phases=20)
    url = f"/tracker/{workflow.pk}/"
    root = tmp_path / "plain"
    root.mkdir()

    def grow(phases: range) -> None:
        for number in phases:
            top = task(project, agent, workflow, f"top{number}", phase=number)
            sub = task(
                project, agent, workflow, f"sub{number}", parent_task_id=str(top.pk), root=root
            )
            task(project, agent, workflow, f"leaf{number}", parent_task_id=str(sub.pk))
            (root / f"f{number}.txt").write_text("x")
            done = task(
                project, agent, workflow, f"done{number}", parent_task_id=str(top.pk), root=root
            )
            tracker.task_complete(
                project=project,
                agent=agent,
                task_id=str(done.pk),
                status="success",
                summary="s",
                root=root,
            )
            tracker.decision_log(
                project=project,
                agent=agent,
                task_id=str(top.pk),
                category="other",
                question="q",
                chosen="c",
                reasoning="r",
            )
            tracker.milestone_log(
                project=project, agent=agent, task_id=str(top.pk), message="m", progress=number
            )
            answered = blocker(project, agent, top)
            blocker(project, agent, top)
            tracker.blocker_resolve(
                issue_id=answered.pk, by=decider, resolution="r", via="dashboard"
            )

    grow(range(1, 3))
    # auth, newest event id, the workflow with its counts (1) and phases (1), the top-level
    # tasks (1), each level below them (sub-tasks, leaves, the empty level: 3), open blockers,
    # decisions, milestones, issues (4)
    expected = AUTH + LIVE_AFTER + 2 + 1 + 3 + 4
    with django_assert_num_queries(expected):
        html = deciding.get(url).content.decode()
    assert len(tagged(html, "resolve-form")) == 2
    grow(range(3, 21))
    with django_assert_num_queries(expected):
        html = deciding.get(url).content.decode()
    assert len(tagged(html, "phase")) == 20
    assert len(tagged(html, "task")) == 20 * 4
    assert len(tagged(html, "resolve-form")) == 20
    with django_assert_num_queries(expected):
        deciding.get(url, headers={"X-Live-Fragment": "1"})


def test_overview_query_count_is_constant_with_tracked_work(
    watching, project, agent, django_assert_num_queries
):
    def grow(count: int) -> None:
        for n in range(count):
            blocker(project, agent, task(project, agent, begin(project, agent, f"w{n}")))

    grow(2)
    # auth, newest event id, active sessions (none, so no runs to read), tracked workflows,
    # recent events
    expected = AUTH + LIVE_AFTER + 3
    with django_assert_num_queries(expected):
        html = watching.get("/").content.decode()
    assert len(tagged(html, "tracked-row")) == 2
    grow(18)
    with django_assert_num_queries(expected):
        html = watching.get("/").content.decode()
    assert len(tagged(html, "tracked-row")) == 20
