#!/usr/bin/env python
"""Django's command-line utility in a clone; installed, ``deepwork-server manage`` is the same."""

from deepwork_site.cli import manage

if __name__ == "__main__":
    manage()
