#!/usr/bin/env python3
"""A stand-in reviewer for tests: reads the prompt on stdin, prints a verdict on stdout.

FAKE_REVIEW picks the behaviour: pass, fail, fail_then_pass (fails the first
FAKE_FAILS times, counted in FAKE_REVIEW_LOG), timeout, garbage, crash, error_wrapper.
A prompt containing FORCE_FAIL fails whatever the mode. FAKE_WRAP=1 wraps the verdict the way
`claude --output-format json` does. FAKE_SLEEP delays the answer. Every call is logged as one
JSON file in FAKE_REVIEW_LOG (argv, prompt, start and end times).
"""

import json
import os
import sys
import time
import uuid
from pathlib import Path

started = time.time()
prompt = sys.stdin.read()
mode = os.environ.get("FAKE_REVIEW", "pass")
log_dir = Path(os.environ.get("FAKE_REVIEW_LOG", "/tmp/fake_reviewer_log"))
log_dir.mkdir(parents=True, exist_ok=True)
earlier_calls = len(list(log_dir.glob("call-*.json")))

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
    json.dumps({"argv": sys.argv, "prompt": prompt, "start": started, "end": time.time()})
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
