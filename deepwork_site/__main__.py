"""``python -m deepwork_site``: the ``deepwork-server`` command without its script."""

from deepwork_site.cli import main

main()
