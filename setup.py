"""The wheel's packages: every app nested under one top-level package, ``deepwork_server``.

Installed, generic names such as ``api``, ``dashboard`` or ``workflows`` would collide with other
projects' packages in a shared environment, so each app ships as ``deepwork_server/<app>`` (the
checkout keeps its layout: ``package_dir`` maps each nested package to its folder here), and
``deepwork_server`` puts its own folder on the import path when the command starts (see its
``__init__``). The site-wide templates, at the checkout's top level where a site puts its
overrides, ship as ``deepwork_server/deepwork_site/templates``, which the settings read when
there is no checkout.

An app is every top-level folder that is a Python package, except the tests and the
distribution package itself: a new app ships without editing this file. Package data (templates,
static files, schemas, standard jobs) is named in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent
DIST = "deepwork_server"
NOT_APPS = {"tests", DIST}

APPS = sorted(
    path.parent.name
    for path in ROOT.glob("*/__init__.py")
    if path.parent.name not in NOT_APPS and not path.parent.name.startswith(".")
)
# The apps the settings cannot run without: a build that lost one must not produce a wheel.
for required in ("deepwork_site", "workflows", "reviews", "mcp_bridge"):
    if required not in APPS:
        raise SystemExit(f"setup.py: the app folder {required}/ is missing from {ROOT}")

# Every folder of an app, data folders (templates, static files, standard jobs) included: a
# folder of data inside a package is itself importable as a namespace package, and setuptools
# wants every such folder named rather than shipped as data of its parent.
app_packages = find_namespace_packages(
    where=str(ROOT),
    include=[pattern for app in APPS for pattern in (app, f"{app}.*")],
    exclude=["*.__pycache__"],
)

SITE_TEMPLATES = f"{DIST}.deepwork_site.templates"
template_folders = find_namespace_packages(where=str(ROOT / "templates"), exclude=["*.__pycache__"])

setup(
    packages=[
        DIST,
        *(f"{DIST}.{package}" for package in app_packages),
        SITE_TEMPLATES,
        *(f"{SITE_TEMPLATES}.{folder}" for folder in template_folders),
    ],
    package_dir={
        DIST: DIST,
        **{f"{DIST}.{app}": app for app in APPS},
        SITE_TEMPLATES: "templates",
    },
)
