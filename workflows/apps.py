from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        # The tallies are a projection of the event log, kept in step by the event writer.
        from workflows import events, tallies

        events.event_subscribe(
            name="insight_tallies",
            kinds=tallies.TALLIED_KINDS,
            handler=tallies.insight_tally_events,
        )
