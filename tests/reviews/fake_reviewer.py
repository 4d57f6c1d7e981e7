#!/usr/bin/env python3
"""A stand-in reviewer for tests: reads the prompt on stdin, prints a verdict on stdout.

FAKE_REVIEW picks the behaviour: pass, fail, fail_then_pass (fails the first
FAKE_FAILS times, counted in FAKE_REVIEW_LOG), timeout, garbage, crash, error_wrapper.
A prompt containing FORCE_FAIL fails whatever the mode. FAKE_WRAP=1 wraps the verdict the way
`claude --output-format json` does. Every call is logged as one JSON file in FAKE_REVIEW_LOG:
argv, the prompt (stdin, decoded as UTF-8), the system prompt read from
``--system-prompt-file`` or ``DEEPWORK_REVIEW_SYSTEM_PROMPT_FILE`` (None without either), and
start and end times.

FAKE_GATE names a folder that holds every call until the test lets it go: the reviewer creates
``arrived-<pid>`` there once it has read its input, then waits for a file named ``release``
(and gives up with exit code 4 after a minute). A test thus sees which reviews are in flight
at once, without timing anything. FAKE_SLEEP delays the answer (the benchmark's stand-in for
a model's latency; tests use FAKE_GATE).
"""

import json
import os
import sys
import time
import uuid
from pathlib import Path

started = time.time()
prompt = sys.stdin.buffer.read().decode("utf-8")
system_file = os.environ.get("DEEPWORK_REVIEW_SYSTEM_PROMPT_FILE")
if "--system-prompt-file" in sys.argv:
    system_file = sys.argv[sys.argv.index("--system-prompt-file") + 1]
system = Path(system_file).read_bytes().decode("utf-8") if system_file else None
mode = os.environ.get("FAKE_REVIEW", "pass")
log_dir = Path(os.environ.get("FAKE_REVIEW_LOG", "/tmp/fake_reviewer_log"))
log_dir.mkdir(parents=True, exist_ok=True)
earlier_calls = len(list(log_dir.glob("call-*.json")))

if gate := os.environ.get("FAKE_GATE"):
    (Path(gate) / f"arrived-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while not (Path(gate) / "release").exists():
        if time.monotonic() > deadline:
            print("the test never released the reviewer", file=sys.stderr)
            sys.exit(4)
        time.sleep(0.01)
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
if mode == "timeout":
    time.sleep(60)

passed = mode == "pass"
if mode == "fail_then_pass":
    passed = earlier_calls >= int(os.environ.get("FAKE_FAILS", "1"))
if "FORCE_FAIL" in prompt:
    passed = False
verdict = {
    "passed": passed,
    "feedback": "Looks good" if passed else "Needs improvement",
    "criteria_results": [
        {"criterion": "Complete", "passed": passed, "feedback": None if passed else "Add more"}
    ],
}
(log_dir / f"call-{time.time():.6f}-{uuid.uuid4().hex[:6]}.json").write_text(
    json.dumps(
        {
            "argv": sys.argv,
            "prompt": prompt,
            "system": system,
            "start": started,
            "end": time.time(),
        }
    )
)
if mode == "garbage":
    print("this is not json {")
elif mode == "crash":
    print("reviewer exploded", file=sys.stderr)
    sys.exit(3)
elif mode == "error_wrapper":
    print(json.dumps({"type": "result", "is_error": True, "result": "rate limited"}))
elif os.environ.get("FAKE_WRAP"):
    print(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "structured_output": verdict,
            }
        )
    )
else:
    print(json.dumps(verdict))
