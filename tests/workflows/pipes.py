"""A watchdog for tests that put a named pipe where a file is expected.

Code that opens a pipe for reading waits for a writer, so a regression would hang the test run.
The watchdog gives the code a generous grace period, then opens each pipe's write end (and
closes it at once) until the code returns: a blocked open wakes up and its read sees
end-of-file. The test then fails, saying the code blocked.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GRACE_SECONDS = 10.0


@contextmanager
def never_blocks_on(*pipes: Path, grace: float = GRACE_SECONDS) -> Iterator[None]:
    done = threading.Event()
    rescued = threading.Event()

    def rescue() -> None:
        if done.wait(grace):
            return
        while not done.is_set():
            for pipe in pipes:
                try:
                    # Fails with ENXIO while nobody has the pipe open for reading.
                    fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                rescued.set()
                os.close(fd)
            done.wait(0.05)

    watchdog = threading.Thread(target=rescue, daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()
        if rescued.is_set():
            raise AssertionError(
                f"the code under test blocked opening a named pipe ({', '.join(map(str, pipes))})"
                f" until the watchdog opened its write end after {grace:g}s"
            )
