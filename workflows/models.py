"""The workflow engine's tables: the job catalog, agents, sessions, step runs and events.

Writes happen only in ``workflows.services``; reads that shape data for an interface live in
``workflows.selectors``. No model declares ``Meta.ordering``: each query orders explicitly.

Why one module of some 700 lines: these tables are one aggregate (a session's runs, stack and
events change together, in one transaction), and most of the length is the named constraints
and indexes, each with the query it serves, and the foreign keys naming the index that leads
with them. The other contexts' tables live in their own apps.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Project(models.Model):
    """A folder whose ``.deepwork/jobs`` are served. One database serves many projects."""

    root_path = models.CharField(max_length=1024, unique=True)
    name = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    # The web server runs a project's review precompute commands (programs the project names,
    # run as the server's user) only while a person allows it; who last changed it, and when.
    review_commands_allowed = models.BooleanField(
        default=False,
        help_text="The web server runs this project's .deepreview precompute commands.",
    )
    review_commands_changed_at = models.DateTimeField(null=True, blank=True)
    review_commands_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Kept when the account is deleted.
    review_commands_changed_by_name = models.CharField(max_length=150, blank=True, default="")
    # Served over the network (hosted /mcp, the REST API's actions) only once a person who may
    # add projects said so; a stdio server registers its own folder without that, and keeps
    # serving it to its own agent.
    hosted = models.BooleanField(
        default=False,
        help_text="Served to tokens over /mcp and the REST API (a person who may add "
        "projects said so).",
    )
    # A removed project is served nowhere; its sessions and their history stay, read-only.
    # Adding its folder again brings it back.
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        permissions = [
            (
                "allow_review_commands",
                "Can allow the web server to run a project's review commands",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(removed_at__isnull=True) | Q(hosted=False),
                name="workflows_project_removed_not_hosted",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def served_refusal(self) -> str | None:
        """Why the REST API and hosted ``/mcp`` do not serve this project, or None: they do."""
        if self.removed_at is not None:
            return (
                f"Project {self.pk} ({self.root_path}) was removed from this server; its "
                "sessions are kept, read-only (adding its folder again brings it back)"
            )
        if not self.hosted:
            return (
                f"Project {self.pk} ({self.root_path}) is not hosted: a local stdio server "
                "registered it, and a person with the permission 'workflows.add_project' must "
                "host it first (deepwork-server project add PATH, POST /api/projects with its "
                "root_path, or the admin's Host action)"
            )
        return None


class Agent(models.Model):
    """An agent identity: owns a stack of workflow sessions.

    An ``mcpserve`` process holds exactly one agent while it runs (``holder``). A process that
    starts without an explicit ``--agent-id`` adopts an agent whose holder is gone, so an agent
    whose server restarted continues where it was.
    """

    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="agents",
        db_index=False,  # workflows_agent_unique_id_per_project leads with it
    )
    agent_id = models.CharField(max_length=128)
    explicit = models.BooleanField(
        default=False, help_text="Named by --agent-id; never adopted by another process."
    )
    roles = models.JSONField(default=list, blank=True)
    takes_dag_steps = models.BooleanField(
        default=False,
        help_text="Joined multi-agent DAG work (register_agent, or mcpserve --toolsets agents).",
    )
    holder = models.CharField(max_length=255, blank=True, default="")
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.IntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Responsive (gets DAG steps) until then; renewed by whoever heartbeats it.",
    )
    left_at = models.DateTimeField(
        null=True, blank=True, help_text="When its process last exited cleanly (gone)."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "agent_id"], name="workflows_agent_unique_id_per_project"
            ),
        ]

    def __str__(self) -> str:
        return self.agent_id


class Job(models.Model):
    """One parsed revision of a job folder.

    A new row is written when a job.yml's content changes; the old row stays so that sessions
    started on it keep the definition they started with.
    """

    class Source(models.TextChoices):
        PROJECT = "project", "Project"
        STANDARD = "standard", "Standard"
        ADDITIONAL = "additional", "Additional folder"
        # A multi-agent DAG workflow an agent defined over MCP. Never part of the
        # folder catalog: ``is_current`` stays False, so catalog syncs never touch it, and its
        # ``dir_name`` is the workflow id agents use.
        DEFINED = "defined", "Defined by an agent"
        # Registered by a DeepWork 0.14 client for one conversation (register_session_job).
        SESSION = "session", "Session job"

    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="jobs",
        db_index=False,  # wf_job_catalog_idx leads with it
    )
    source = models.CharField(max_length=16, choices=Source.choices)
    dir_name = models.CharField(max_length=255)
    job_dir = models.CharField(max_length=1024)
    name = models.CharField(max_length=255)
    version = models.CharField(max_length=32)
    summary = models.CharField(max_length=255)
    common_info = models.TextField()
    definition = models.JSONField()
    content_hash = models.CharField(max_length=64)
    file_mtime_ns = models.BigIntegerField()
    file_size = models.BigIntegerField()
    position = models.IntegerField(default=0, help_text="Catalog order while current.")
    is_current = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    creator_id = models.CharField(
        max_length=128, blank=True, default="", help_text="The agent that defined a DAG job."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["dir_name"],
                condition=Q(source="defined"),
                name="workflows_job_defined_unique_id",
            ),
            models.UniqueConstraint(
                fields=["project", "job_dir", "content_hash"],
                name="workflows_job_unique_revision",
            ),
            models.UniqueConstraint(
                fields=["project", "dir_name"],
                condition=Q(is_current=True),
                name="workflows_job_one_current_per_dir_name",
            ),
            models.CheckConstraint(
                condition=Q(source__in=["project", "standard", "additional", "defined", "session"]),
                name="workflows_job_source_valid",
            ),
        ]
        indexes = [
            # The catalog listing: current jobs of a project in catalog order.
            models.Index(fields=["project", "is_current", "position"], name="wf_job_catalog_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.version})"


class Workflow(models.Model):
    job = models.ForeignKey(
        Job,
        on_delete=models.CASCADE,
        related_name="workflows",
        db_index=False,  # workflows_workflow_unique_name leads with it
    )
    name = models.CharField(max_length=255)
    summary = models.CharField(max_length=255)
    position = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="workflows_workflow_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.job.dir_name}/{self.name}"


class Step(models.Model):
    job = models.ForeignKey(
        Job,
        on_delete=models.CASCADE,
        related_name="steps",
        db_index=False,  # workflows_step_unique_id leads with it
    )
    step_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    description = models.TextField()
    instructions_file = models.CharField(max_length=1024)
    outputs = models.JSONField(default=list)
    reviews = models.JSONField(default=list)
    inputs = models.JSONField(default=list)
    position = models.IntegerField(default=0)
    # A DAG step's hand-over; empty for DeepWork steps.
    assigned_role = models.CharField(max_length=128, blank=True, default="")
    assigned_agent_id = models.CharField(max_length=128, blank=True, default="")
    tool_to_call = models.CharField(max_length=255, blank=True, default="")
    tool_arguments = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "step_id"], name="workflows_step_unique_id"),
        ]

    def __str__(self) -> str:
        return self.step_id


class WorkflowStep(models.Model):
    """A step's place in a workflow: one node of the workflow's DAG.

    DeepWork's ordered entries become levels (``entry_index``); members of a concurrent entry
    share a level, and each node depends on every node of the level before it.
    """

    workflow = models.ForeignKey(
        Workflow,
        on_delete=models.CASCADE,
        related_name="nodes",
        db_index=False,  # workflows_workflowstep_unique_step leads with it
    )
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="placements")
    entry_index = models.IntegerField()
    position_in_entry = models.IntegerField(default=0)
    is_concurrent = models.BooleanField(default=False)
    depends_on = models.ManyToManyField("self", symmetrical=False, related_name="dependents")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "step"], name="workflows_workflowstep_unique_step"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow}#{self.entry_index}:{self.step.step_id}"


class JobLoadError(models.Model):
    """A job folder whose job.yml currently fails to load."""

    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="load_errors",
        db_index=False,  # workflows_jobloaderror_unique_dir leads with it
    )
    dir_name = models.CharField(max_length=255)
    job_dir = models.CharField(max_length=1024)
    error = models.TextField()
    position = models.IntegerField(default=0)
    detected_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "job_dir"], name="workflows_jobloaderror_unique_dir"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dir_name}: {self.error[:60]}"


class WorkflowSession(models.Model):
    """One run of a workflow, on one agent's stack."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        COMPLETED = "completed", "Completed"
        ABORTED = "aborted", "Aborted"
        # A DAG execution: on no agent's stack, its steps handed to many agents.
        RUNNING = "running", "Running (DAG)"
        FAILED = "failed", "Failed (DAG)"

    session_id = models.CharField(max_length=32, unique=True)
    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="sessions",
        db_index=False,  # wf_session_project_idx leads with it
    )
    agent = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="sessions",
        db_index=False,  # wf_session_stack_idx leads with it
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="sessions")
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="sessions")
    job_name = models.CharField(max_length=255, help_text="The job name as the caller gave it.")
    workflow_name = models.CharField(max_length=255)
    instance_id = models.CharField(max_length=255, null=True, blank=True)
    goal = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    current_entry_index = models.IntegerField(default=0)
    current_step_id = models.CharField(max_length=255)
    revision = models.IntegerField(
        default=0, help_text="Bumped on every transition; transitions compare-and-set on it."
    )
    abort_reason = models.TextField(null=True, blank=True)
    aborted_by = models.CharField(
        max_length=150,
        blank=True,
        default="",
        help_text="The person who aborted the session; empty when its agent did.",
    )
    # A person aborted the session while it was the top of its agent's stack, and the agent has
    # not been told yet: its next hand-in is refused once with who, when and why, so it does not
    # hand its work to the session below or read a bare "no active session".
    abort_untold = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    # DeepWork 0.14 sessions (workflows.generations.v0_14): decided at start_workflow and
    # answered in that generation's shape. A 0.14 stack is named by the caller's conversation
    # id and, for a sub-agent, its agent_id.
    class Generation(models.TextChoices):
        DEEPWORK_091 = "0.9", "DeepWork 0.9.1"
        DEEPWORK_014 = "0.14", "DeepWork 0.14"

    generation = models.CharField(
        max_length=8, choices=Generation.choices, default=Generation.DEEPWORK_091
    )
    conversation_id = models.CharField(max_length=255, blank=True, default="")
    conversation_agent = models.CharField(max_length=255, blank=True, default="")
    inputs = models.JSONField(
        default=dict, blank=True, help_text="start_workflow inputs of a 0.14 session."
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(generation__in=["0.9", "0.14"]),
                name="workflows_session_generation_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "completed", "aborted", "running", "failed"]),
                name="workflows_session_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "running"], completed_at__isnull=True)
                | ~Q(status__in=["active", "running"]) & Q(completed_at__isnull=False),
                name="workflows_session_completed_at_matches_status",
            ),
        ]
        permissions = [
            ("abort_session", "Can abort a workflow session"),
            ("drive_session", "Can start workflows and hand in steps over the API"),
        ]
        indexes = [
            # An agent's stack: its active sessions, bottom to top.
            models.Index(fields=["agent", "status", "id"], name="wf_session_stack_idx"),
            # The dashboard and API session lists, newest first per project.
            models.Index(fields=["project", "-started_at"], name="wf_session_project_idx"),
            # The same lists across all projects, newest first (keyset and offset pages).
            models.Index(fields=["-started_at", "-id"], name="wf_session_recent_idx"),
            # The overview's live stacks: only active sessions, a small part of the table.
            models.Index(
                fields=["project", "agent", "id"],
                condition=Q(status="active"),
                name="wf_session_active_idx",
            ),
            # Insights: sessions aborted in a date range, per agent.
            models.Index(fields=["status", "completed_at"], name="wf_session_ended_idx"),
            # Insights: the sessions open during a date range, whatever their outcome (time
            # per step joins only those to the step runs completed in the range).
            models.Index(fields=["completed_at"], name="wf_session_done_at_idx"),
            # A hand-in's target when a person aborted the top of the agent's stack and the
            # agent has not been told yet: rare rows, found without reading the agent's history.
            models.Index(
                fields=["agent", "id"],
                condition=Q(abort_untold=True),
                name="wf_session_untold_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.job_name}/{self.workflow_name} ({self.status})"


class StepRun(models.Model):
    """One step of a session, from the moment it becomes current until it is finished."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        COMPLETED = "completed", "Completed"
        INVALIDATED = "invalidated", "Invalidated by go_to_step"
        ABORTED = "aborted", "Aborted with its session"
        # A DAG step's life: waiting for its dependencies, waiting for an agent,
        # handed to an agent, then completed or failed.
        PENDING = "pending", "Pending (DAG)"
        READY = "ready", "Ready, no agent yet (DAG)"
        ASSIGNED = "assigned", "Assigned to an agent (DAG)"
        FAILED = "failed", "Failed (DAG)"

    session = models.ForeignKey(
        WorkflowSession,
        on_delete=models.CASCADE,
        related_name="runs",
        db_index=False,  # wf_steprun_session_idx leads with it
    )
    step_def = models.ForeignKey(Step, on_delete=models.PROTECT, related_name="runs")
    step_id = models.CharField(max_length=255)
    entry_index = models.IntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    outputs = models.JSONField(default=dict, blank=True)
    notes = models.TextField(null=True, blank=True)
    quality_attempts = models.IntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    # A DAG step's agent, its answer and how often it was handed on from a lost agent.
    assigned_agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="dag_runs",
        db_index=False,  # wf_steprun_agent_idx leads with it
    )
    assigned_at = models.DateTimeField(null=True, blank=True)
    # When a DAG step last became ready for an agent (its dependencies done, or taken from a
    # lost agent): the hand-off wait is from here to ``assigned_at``.
    ready_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)
    handoffs = models.IntegerField(default=0)
    # The inputs a 0.14 step was started with (name -> value, None when not yet available).
    input_values = models.JSONField(default=dict, blank=True)

    class FilesStatus(models.TextChoices):
        PENDING = "pending", "Not computed yet"
        RECORDED = "recorded", "Recorded"
        UNKNOWN = "unknown", "Unknown"

    # The files the step changed (workflows.services.step_changes): the project's snapshot
    # when the step started, and at its end {added, modified, deleted} with any warnings.
    files_snapshot = models.JSONField(null=True, blank=True)
    files_status = models.CharField(
        max_length=16, choices=FilesStatus.choices, default=FilesStatus.PENDING
    )
    files_changed = models.JSONField(null=True, blank=True)
    files_warnings = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    status__in=[
                        "active",
                        "completed",
                        "invalidated",
                        "aborted",
                        "pending",
                        "ready",
                        "assigned",
                        "failed",
                    ]
                ),
                name="workflows_steprun_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(files_status__in=["pending", "recorded", "unknown"]),
                name="workflows_steprun_files_status_valid",
            ),
            # At most one live run of a step per session: a race can never start it twice.
            models.UniqueConstraint(
                fields=["session", "step_id"],
                condition=Q(status="active"),
                name="workflows_steprun_one_active_per_step",
            ),
        ]
        indexes = [
            # A session's timeline and its current entry's runs.
            models.Index(
                fields=["session", "status", "entry_index"], name="wf_steprun_session_idx"
            ),
            # An agent's assignments and load (await_assignment polls it).
            models.Index(fields=["assigned_agent", "status"], name="wf_steprun_agent_idx"),
            # DAG steps still waiting for an agent or held by one: the dispatch sweep.
            models.Index(
                fields=["status", "session"],
                condition=Q(status__in=["ready", "assigned"]),
                name="wf_steprun_dag_open_idx",
            ),
            # Insights: steps finished in a date range (time per step, steps per agent a day).
            models.Index(
                fields=["completed_at"],
                condition=Q(status="completed"),
                name="wf_steprun_done_idx",
            ),
            # Insights: DAG hand-offs (steps claimed) in a date range.
            models.Index(
                fields=["assigned_at"],
                condition=Q(ready_at__isnull=False),
                name="wf_steprun_handoff_idx",
            ),
            # Insights: DAG steps finished in a date range (load per role).
            models.Index(
                fields=["completed_at"],
                condition=Q(ready_at__isnull=False),
                name="wf_steprun_dag_done_idx",
            ),
            # Other agents' runs that ended during a step (the warning with its files changed):
            # read by time, so a look costs the same however long the project's history.
            models.Index(
                fields=["completed_at"],
                condition=Q(completed_at__isnull=False),
                name="wf_steprun_ended_at_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session.session_id}:{self.step_id} ({self.status})"


class Event(models.Model):
    """Append-only outbox of everything that happened; written in the transition's transaction,
    only through ``workflows.events.event_record``.

    The dashboard tails it (``id > last_seen``) to push live updates across processes.
    """

    class Kind(models.TextChoices):
        SESSION_STARTED = "session_started", "Session started"
        STEP_STARTED = "step_started", "Step started"
        STEP_FINISHED = "step_finished", "Step finished"
        STEP_REOPENED = "step_reopened", "Returned to an earlier step"
        SESSION_COMPLETED = "session_completed", "Session completed"
        SESSION_ABORTED = "session_aborted", "Session aborted"
        REVIEW_REQUESTED = "review_requested", "Self-review requested"
        REVIEW_PASSED = "review_passed", "Review passed"
        REVIEW_FAILED = "review_failed", "Review failed"
        REVIEW_OVERRIDDEN = "review_overridden", "Review overridden by a person"
        CHANGES_REQUESTED = "changes_requested", "Changes requested by a person"
        OVERRIDE_DELIVERED = "override_delivered", "Override applied to the agent's hand-in"
        CHANGES_DELIVERED = "changes_delivered", "Requested changes delivered to the agent"
        CATALOG_SYNCED = "catalog_synced", "Job catalog changed"
        AGENT_CONNECTED = "agent_connected", "Agent connected"
        STEP_FILES_RECORDED = "step_files_recorded", "Files changed by a step recorded"
        # The tracker's events, named as in the original.
        WORKFLOW_CREATED = "workflow:created", "Tracked workflow started"
        WORKFLOW_UPDATED = "workflow:updated", "Tracked workflow updated"
        PHASE_CREATED = "phase:created", "Phase started"
        PHASE_UPDATED = "phase:updated", "Phase updated"
        TASK_CREATED = "task:created", "Task started"
        TASK_UPDATED = "task:updated", "Task completed"
        DECISION_CREATED = "decision:created", "Decision logged"
        ISSUE_CREATED = "issue:created", "Issue logged"
        ISSUE_UPDATED = "issue:updated", "Blocker resolved by a person"
        MILESTONE_CREATED = "milestone:created", "Milestone logged"
        # Multi-agent DAG workflows.
        DAG_DEFINED = "dag_defined", "DAG workflow defined"
        DAG_DELETED = "dag_deleted", "DAG workflow deleted"
        DAG_STEP_ASSIGNED = "dag_step_assigned", "DAG step handed to an agent"
        DAG_STEP_COMPLETED = "dag_step_completed", "DAG step completed"
        DAG_STEP_FAILED = "dag_step_failed", "DAG step failed"
        DAG_STEP_HANDED_ON = "dag_step_handed_on", "DAG step taken from a lost agent"
        SESSION_FAILED = "session_failed", "DAG workflow failed"
        AGENT_REGISTERED = "agent_registered", "Agent registered with roles"

    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,  # wf_event_project_idx leads with it
    )
    session = models.ForeignKey(
        WorkflowSession,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,  # wf_event_session_idx leads with it
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # A session's audit timeline.
            models.Index(fields=["session", "id"], name="wf_event_session_idx"),
            # The per-project live feed: events after an id.
            models.Index(fields=["project", "id"], name="wf_event_project_idx"),
            # The admin's and API's event filter by kind, newest first.
            models.Index(fields=["kind", "id"], name="wf_event_kind_idx"),
            # Insights: events of one kind in a date range, counted per agent (steps finished,
            # failed review rounds); agent and project ride along so the count reads the index.
            models.Index(
                fields=["kind", "created_at", "agent", "project"], name="wf_event_kind_time_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind}"


class SessionJob(models.Model):
    """A job.yml a conversation registered for itself (DeepWork 0.14's ``register_session_job``),
    visible to that conversation only.

    The text is kept verbatim (``get_session_job`` returns it even when it does not validate);
    ``job`` is the parsed revision a session starts on, null while the text is invalid.
    """

    project = models.ForeignKey(
        "workflows.Project",
        on_delete=models.CASCADE,
        related_name="session_jobs",
        db_index=False,  # workflows_sessionjob_unique_name leads with it
    )
    conversation_id = models.CharField(max_length=255)
    job_name = models.CharField(max_length=255)
    yaml_text = models.TextField()
    job = models.ForeignKey(
        "workflows.Job", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    error = models.TextField(blank=True, default="")
    registered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "conversation_id", "job_name"],
                name="workflows_sessionjob_unique_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}:{self.job_name}"


class CopiedFromSession(models.Model):
    """A session's project, generation, job and workflow, which never change, copied onto rows
    that other contexts filter by them (the insights' tallies, review verdicts), so that they
    join no session."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    generation = models.CharField(max_length=8)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    job_name = models.CharField(max_length=255)
    workflow_name = models.CharField(max_length=255)

    class Meta:
        abstract = True

    @staticmethod
    def copied_from(session: WorkflowSession) -> dict[str, Any]:
        return {
            "project_id": session.project_id,
            "generation": session.generation,
            "job_id": session.job_id,
            "job_name": session.job_name,
            "workflow_name": session.workflow_name,
        }


__all__ = [
    "Agent",
    "CopiedFromSession",
    "Event",
    "Job",
    "JobLoadError",
    "Project",
    "SessionJob",
    "Step",
    "StepRun",
    "Workflow",
    "WorkflowSession",
    "WorkflowStep",
]
