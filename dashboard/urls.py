from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import connect_views, dag_views, insight_views, tracker_views, views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="registration/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/", views.jobs, name="jobs"),
    path("connect/", connect_views.connect, name="connect"),
    path(
        "connect/tokens/<int:token_id>/revoke",
        connect_views.connect_token_revoke,
        name="connect_token_revoke",
    ),
    path("sessions/", views.sessions, name="sessions"),
    path("sessions/<str:session_id>/", views.session_detail, name="session"),
    path("sessions/<str:session_id>/files/", views.session_file, name="session_file"),
    path("sessions/<str:session_id>/override/", views.session_override, name="override"),
    path(
        "sessions/<str:session_id>/request-changes/",
        views.session_request_changes,
        name="request_changes",
    ),
    path("sessions/<str:session_id>/abort/", views.session_abort_view, name="abort"),
    # Multi-agent DAG workflows.
    path("dag/", dag_views.dag_list, name="dag_list"),
    path("dag/<str:workflow_id>/", dag_views.dag_detail, name="dag"),
    path(
        "dag/<str:workflow_id>/steps/<str:step_id>/complete/",
        dag_views.dag_step_complete,
        name="dag_step_complete",
    ),
    path(
        "dag/<str:workflow_id>/steps/<str:step_id>/fail/",
        dag_views.dag_step_fail,
        name="dag_step_fail",
    ),
    path("agents/", dag_views.agents, name="agents"),
    # Insights (issue 14): charts over time, their exports, a session's history.
    path("insights/", insight_views.insights_activity, name="insights"),
    path("insights/time/", insight_views.insights_time, name="insights_time"),
    path("insights/reviews/", insight_views.insights_reviews, name="insights_reviews"),
    path("insights/tracker/", insight_views.insights_tracker, name="insights_tracker"),
    path("insights/dag/", insight_views.insights_dag, name="insights_dag"),
    path(
        "insights/export/<slug:name>.<str:fmt>",
        insight_views.insights_export,
        name="insights_export",
    ),
    path(
        "sessions/<str:session_id>/history.<str:fmt>",
        insight_views.session_history_export,
        name="session_history",
    ),
]

# The tracker's pages.
urlpatterns += [
    path("tracker/", tracker_views.tracked_workflows, name="tracker_workflows"),
    path("tracker/<int:workflow_id>/", tracker_views.tracked_workflow, name="tracker_workflow"),
    path(
        "tracker/<int:workflow_id>/tasks/<int:task_id>/",
        tracker_views.tracked_task,
        name="tracker_task",
    ),
    path(
        "tracker/<int:workflow_id>/blockers/<int:issue_id>/resolve/",
        tracker_views.tracked_blocker_resolve,
        name="tracker_resolve",
    ),
]
