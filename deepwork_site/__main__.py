"""``python -m deepwork_site``: the ``deepwork-server`` command without its script, for a
process whose import path already holds the apps (a clone, or the migration child of an
installed server)."""

from deepwork_site.cli import main

main()
