from django.apps import AppConfig


class DagConfig(AppConfig):
    name = "dag"
    verbose_name = "DAG workflows"
