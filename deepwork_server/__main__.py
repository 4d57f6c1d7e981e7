"""``python -m deepwork_server``: the ``deepwork-server`` command without its script."""

from deepwork_server import main

main()
