"""A real browser (Debian's chromium driven by Playwright) against the real ASGI server.

The web server runs as a uvicorn subprocess on the test database, so these tests commit their
data (``transaction=True``); agents are real ``mcpserve`` subprocesses on the same database.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Group, User

from tests.e2e.test_mcpserve_stdio import child_database_url

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    """The environment of the web server and of agents: the test database, one secret key."""
    env = {
        **os.environ,
        "DATABASE_URL": child_database_url(),
        "SECRET_KEY": "browser-tests-not-secret",
        "DEEPWORK_LOG_LEVEL": "WARNING",
        **extra,
    }
    if "REDIS_URL" not in extra:
        env.pop("REDIS_URL", None)
    return env


def start_web_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "deepwork_site.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"the web server exited: {process.stderr.read().decode()}")
            time.sleep(0.1)
    process.kill()
    pytest.fail("the web server did not start listening within 30 s")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def web_server(transactional_db):
    process, url = start_web_server(server_env())
    yield url
    stop(process)


def create_person(username: str, group: str) -> User:
    """A user the web server can log in: hashed with the server's default hasher (the test
    process itself uses a fast one the server does not accept)."""
    user = User.objects.create(
        username=username, password=PBKDF2PasswordHasher().encode(PASSWORD, "browser-salt")
    )
    user.groups.add(Group.objects.get(name=group))
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
