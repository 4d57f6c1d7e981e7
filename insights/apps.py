from django.apps import AppConfig


class InsightsConfig(AppConfig):
    name = "insights"
    verbose_name = "Insights"

    def ready(self) -> None:
        # The tallies are a projection of the event log: the engine's event writer counts them
        # in the transaction that writes each event, and the engine never imports this app.
        from insights import tallies
        from workflows import events

        events.event_subscribe(
            name="insight_tallies",
            kinds=tallies.TALLIED_KINDS,
            handler=tallies.insight_tally_events,
        )
