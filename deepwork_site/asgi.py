"""ASGI entry point: pages, admin and API over HTTP (static files served in-process)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")

django_application = get_asgi_application()

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

# The embedded default has no separate web server for static files; serve them here.
application = ASGIStaticFilesHandler(django_application)
