#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import gc
import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["mcpserve"]:
        # Start-up allocates hundreds of thousands of long-lived objects (Django, FastMCP,
        # pydantic); collecting while they pile up costs ~250 ms of an agent's wait for the
        # server. mcpserve freezes them and turns collection back on before serving.
        gc.disable()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
