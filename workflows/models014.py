"""DeepWork 0.14's session jobs: job definitions a conversation registered for itself."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class SessionJob(models.Model):
    """A job.yml registered with ``register_session_job``, visible to one conversation only.

    The text is kept verbatim (``get_session_job`` returns it even when it does not validate);
    ``job`` is the parsed revision a session starts on, null while the text is invalid.
    """

    project = models.ForeignKey(
        "workflows.Project", on_delete=models.CASCADE, related_name="session_jobs"
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
