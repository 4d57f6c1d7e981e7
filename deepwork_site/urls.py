from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from api.api import api

urlpatterns = [
    # Browsers ask for /favicon.ico on pages that name no icon (the admin, the API docs).
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True),
    ),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("", include("dashboard.urls")),
]
