"""A real browser (Debian's chromium driven by Playwright) against the real ASGI server.

The web server runs as a uvicorn subprocess on the test database, so these tests commit their
data (``transaction=True``); agents are real ``mcpserve`` subprocesses on the same database.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User

from tests.support.factories import make_user
from tests.support.processes import (
    child_database_url,
    child_env,
    start_uvicorn,
    stop,
    wait_for_port,
)

CHROMIUM = os.environ.get("DEEPWORK_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "browser-test-password"


def _chromium_or_skip() -> str:
    if shutil.which(CHROMIUM):
        return CHROMIUM
    message = (
        f"Chromium not found at {CHROMIUM}; `make test` installs Debian's chromium package "
        "(or set DEEPWORK_CHROMIUM)"
    )
    if os.environ.get("DEEPWORK_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


def server_env(**extra: str) -> dict[str, str]:
    """The environment of the web server and of agents: the test database, one secret key."""
    return child_env(inherit=True, DATABASE_URL=child_database_url(), **extra)


def start_web_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    process, port = start_uvicorn(env)
    wait_for_port(process, port, "the web server")
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture
def web_server(transactional_db):
    process, url = start_web_server(server_env())
    yield url
    stop(process)


def create_person(username: str, group: str) -> User:
    """A user the web server can log in: hashed with the server's default hasher (the test
    process itself uses a fast one the server does not accept)."""
    user = make_user(username=username, groups=(group,))
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, "browser-salt")
    user.save(update_fields=["password"])
    return user


@pytest.fixture
def decider(transactional_db) -> User:
    """A person who may watch and decide: a member of the Deciders group, not a superuser."""
    return create_person("dana", "Deciders")


@pytest.fixture
async def browser():
    from playwright.async_api import async_playwright

    executable = _chromium_or_skip()
    async with async_playwright() as playwright:
        instance = await playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        yield instance
        await instance.close()


async def log_in(browser, base_url: str, username: str, password: str = PASSWORD):
    """A new page, logged in through the login form like a person would."""
    context = await browser.new_context(base_url=base_url)
    page = await context.new_page()
    await page.goto("/")
    assert "/login/" in page.url, f"an anonymous visit was not sent to log in: {page.url}"
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", password)
    await page.press("input[name=password]", "Enter")
    await page.wait_for_url(f"{base_url}/")
    return page
