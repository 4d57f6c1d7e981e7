"""``python -m deepwork_server``: the ``deepwork-server`` command without its script.

``python -m`` puts the current folder first on the import path, and the current folder is
usually the project the server serves: its own ``yaml.py`` or ``django/`` would be imported in
place of the server's. So the folder comes off the path before anything else is imported.
Only this package itself has been found by then, and nothing here can guard against a project
folder holding a ``deepwork_server`` package: in a folder one does not trust, run
``deepwork-server``, or ``python -P -m deepwork_server`` (``-P`` leaves the folder off the path).
"""

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from deepwork_server import main  # noqa: E402 (after the path is cleaned)

main()
