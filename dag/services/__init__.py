"""The DAG scheduler's writers, by idea: ``definitions`` (define, delete), ``scheduling``
(execute, the scheduler's pass, dispatch, agents' registration and renewal), ``reports`` (agents'
reports and cancelling a run) and ``human_steps`` (steps people do). Their public names are
importable from here, as ``dag.services.<name>``."""

from dag.services.base import (
    HUMAN_ROLE,
    MAX_ROLES,
    OPEN,
    RUNNING,
    USER_PREFIX,
    Advance,
    Defined,
    Delegation,
    Report,
    StepNotPlaced,
    agent_id_clean,
    dag_job,
    dag_status,
    is_human,
    is_human_step,
)
from dag.services.definitions import dag_define, dag_delete
from dag.services.human_steps import dag_person_report
from dag.services.reports import dag_cancel, dag_report_completion, dag_report_failure
from dag.services.scheduling import (
    dag_agent,
    dag_agent_leave,
    dag_agent_register,
    dag_agent_renew,
    dag_dispatch,
    dag_execute,
)

__all__ = [
    "HUMAN_ROLE",
    "MAX_ROLES",
    "OPEN",
    "RUNNING",
    "USER_PREFIX",
    "Advance",
    "Defined",
    "Delegation",
    "StepNotPlaced",
    "Report",
    "agent_id_clean",
    "dag_agent",
    "dag_agent_leave",
    "dag_agent_register",
    "dag_agent_renew",
    "dag_cancel",
    "dag_define",
    "dag_delete",
    "dag_dispatch",
    "dag_execute",
    "dag_job",
    "dag_person_report",
    "dag_report_completion",
    "dag_report_failure",
    "dag_status",
    "is_human",
    "is_human_step",
]
