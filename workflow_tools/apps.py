from django.apps import AppConfig


class WorkflowToolsConfig(AppConfig):
    name = "workflow_tools"
    verbose_name = "Workflow tools"

    def ready(self) -> None:
        # The scheduler does not know its workflows are served as tools: a DAG workflow's tool
        # name is freed here, when the scheduler records its execution or deletion.
        from workflow_tools import reactions
        from workflows import events

        events.event_subscribe(
            name="workflow_tool_names",
            kinds=reactions.DAG_EVENT_KINDS,
            handler=reactions.workflow_tool_names_on_dag_events,
        )
