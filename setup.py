"""The wheel's packages: every app with its subpackages, and the site-wide templates.

The checkout keeps those templates at its top level (``templates/``, where a site puts its
overrides); installed, they are the ``templates`` folder of ``deepwork_site``, which the settings
read when there is no checkout. Everything else about the package is in pyproject.toml.
"""

from setuptools import find_packages, setup

APPS = (
    "deepwork_site",
    "workflows",
    "tracker",
    "dag",
    "workflow_tools",
    "reviews",
    "mcp_bridge",
    "dashboard",
    "accounts",
    "api",
)

setup(
    packages=[
        *find_packages(include=[pattern for app in APPS for pattern in (app, f"{app}.*")]),
        "deepwork_site.templates",
    ],
    package_dir={"deepwork_site.templates": "templates"},
)
