#!/usr/bin/env bash
# `make conformance`: run the official MCP conformance suite (@modelcontextprotocol/conformance)
# against `manage.py mcpserve --transport http`, then against `/mcp` of the ASGI application
# (`make run`: uvicorn serving deepwork_site.asgi), with the same baseline for both.
#
# What it does
#   1. Installs the pinned tooling (package.json + package-lock.json next to this script: Node 22
#      as the npm package `node`, because the suite needs Node >= 22, and the suite itself) with
#      `npm ci` into .tools/conformance (git-ignored). The install is reused while the lockfile
#      hash is unchanged.
#   2. Makes a throwaway project (mktemp) holding one small valid job, and a throwaway SQLite
#      database through DEEPWORK_VAR_DIR (DATABASE_URL is unset), so the developer's database is
#      never touched.
#   3. Starts mcpserve on a free loopback port with a random bearer token, plus the auth proxy
#      (below) on another free port, and runs `conformance server` against the proxy with
#      baseline.yml as the expected failures. Both processes are stopped after the suite.
#   4. The same for uvicorn serving the ASGI application, whose /mcp takes an API token allowed
#      MCP (made here for a throwaway user, bound to the throwaway project). Its expected
#      failures are baseline.yml's plus those of baseline-hosted.yml (stateless serving).
#
# Why a proxy for the bearer token
#   The conformance CLI (0.1.16) has no way to send a header: `conformance server --help` offers
#   only --url/--scenario/--suite/--expected-failures/-o/--spec-version/--verbose, and its source
#   (dist/index.js) builds `new StreamableHTTPClientTransport(new URL(url))` without requestInit
#   and sends raw undici requests with fixed headers; it reads no environment variable for
#   them. Disabling auth for the test would test a product we do not ship, and monkey-patching
#   Node's fetch/undici through NODE_OPTIONS would depend on the suite's internals, so instead
#   auth_proxy.py (stdlib only) sits in front and adds `Authorization: Bearer <token>` to every
#   request. It forwards everything else byte for byte, including the client's Host and Origin
#   headers and streamed (SSE) responses, so the server's own host/origin guard still decides
#   the dns-rebinding scenario (it answers 421 to `Host: evil.example.com`), and with the token
#   always valid a 4xx there cannot come from authentication. Before the suite runs,
#   preflight.py proves that mcpserve itself still answers 401 without the token, and that
#   get_workflows (through the proxy) lists the throwaway job without load errors.
#
# Exit code: the suite's own (the first non-zero of the two runs). 0 when only scenarios listed
# in baseline.yml fail; 1 on any other failure or on a stale baseline entry (a listed scenario
# that now passes). 2 for a setup error.
#
# Environment knobs
#   CONFORMANCE_TOOLS_DIR  where to install the tooling (default: <repo>/.tools/conformance)
#   CONFORMANCE_KEEP=1     keep the work folder (project, DB, logs, results) even on success;
#                          it is always kept when the run fails
#   CONFORMANCE_ARGS       extra arguments for `conformance server`, e.g. "--scenario ping"
set -euo pipefail

started=$(date +%s)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/tests/conformance"
PY="$ROOT/.venv/bin/python"
TOOLS="${CONFORMANCE_TOOLS_DIR:-$ROOT/.tools/conformance}"
JOB_NAME=conformance_demo

say() { printf 'conformance: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 2; }

[ -x "$PY" ] || die "$PY not found; run 'make setup' first"
command -v npm >/dev/null || die "npm is required to install the conformance tooling"
command -v python3 >/dev/null || die "python3 is required"

# --- 1. Tooling ---------------------------------------------------------------------------
lock_hash=$(python3 -c 'import hashlib, sys
h = hashlib.sha256()
for p in sys.argv[1:]:
    h.update(open(p, "rb").read())
print(h.hexdigest())' "$HERE/package.json" "$HERE/package-lock.json")

tools_ok() {
    "$TOOLS/node_modules/.bin/node" -e \
        'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)' 2>/dev/null \
        && [ -x "$TOOLS/node_modules/.bin/conformance" ]
}

if [ "$(cat "$TOOLS/.lock-hash" 2>/dev/null)" = "$lock_hash" ] && tools_ok; then
    say "tooling up to date in $TOOLS"
else
    say "installing the pinned tooling into $TOOLS (npm ci)"
    mkdir -p "$TOOLS"
    rm -rf "$TOOLS/node_modules" "$TOOLS/.lock-hash"
    cp "$HERE/package.json" "$HERE/package-lock.json" "$TOOLS/"
    # The `node` package fetches its platform binary in a preinstall script (allowed by
    # package.json's allowScripts), so install scripts must not be disabled here.
    (cd "$TOOLS" && npm ci --no-audit --no-fund --loglevel=error) >&2
    tools_ok || die "npm ci did not produce Node >= 22 and the conformance CLI in $TOOLS"
    echo "$lock_hash" >"$TOOLS/.lock-hash"
fi
export PATH="$TOOLS/node_modules/.bin:$PATH"
say "node $(node --version), conformance $(conformance --version)"
tooled=$(date +%s)

# --- 2. Throwaway work folder: project, database, logs, results -----------------------------
SERVER_PID=""
PROXY_PID=""
stop_pid() { # TERM, then KILL after 5s; only ever the processes this script started
    local pid=$1 i
    { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; } || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    stop_pid "$PROXY_PID"
    stop_pid "$SERVER_PID"
    if [ "$rc" -eq 0 ] && [ "${CONFORMANCE_KEEP:-0}" != 1 ]; then
        rm -rf "$WORK"
    else
        say "kept $WORK (<target>-server.log, -proxy.log, -suite.log, -results/)"
    fi
    exit "$rc"
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/deepwork-conformance.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PROJECT="$WORK/project"
JOB="$PROJECT/.deepwork/jobs/$JOB_NAME"
mkdir -p "$JOB/steps" "$WORK/var"
# A small valid job (deepwork 0.9.1 job.yml format) so that get_workflows lists something.
cat >"$JOB/job.yml" <<'YAML'
name: conformance_demo
version: "1.0.0"
summary: "Tiny job so that get_workflows has something to list"
common_job_info_provided_to_all_steps_at_runtime: "Throwaway project made by tests/conformance/run.sh."
workflows:
  - name: main
    summary: "Write a note, then review it"
    steps: [write_note, review_note]
steps:
  - id: write_note
    name: "Write note"
    description: "Write a short note"
    instructions_file: steps/write_note.md
    inputs: [{name: topic, description: "What the note is about"}]
    outputs:
      note.md: {type: file, description: "The note", required: true}
    reviews:
      - run_each: note.md
        quality_criteria: {"Clear": "The note states its topic in the first line."}
  - id: review_note
    name: "Review note"
    description: "Check the note"
    instructions_file: steps/review_note.md
    inputs: [{file: note.md, from_step: write_note}]
    dependencies: [write_note]
    outputs: {}
    reviews: []
YAML
printf '# Write note\n\nWrite `note.md` about the topic.\n' >"$JOB/steps/write_note.md"
printf '# Review note\n\nRead `note.md` and check it.\n' >"$JOB/steps/review_note.md"

# --- 3. Server and proxy ------------------------------------------------------------------
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
wait_port() { # wait_port PORT PID LOG: until something accepts on PORT; fail if PID dies
    local port=$1 pid=$2 log=$3 i
    for i in $(seq 1 300); do
        if python3 -c 'import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()' "$port" \
            2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "process $pid exited before listening on port $port; its log:"
            sed 's/^/    /' "$log" >&2
            return 1
        fi
        sleep 0.1
    done
    say "nothing listens on port $port after 30s; log:"
    sed 's/^/    /' "$log" >&2
    return 1
}

TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')

cd "$ROOT"
# DATABASE_URL unset + DEEPWORK_VAR_DIR: a fresh SQLite file in the work folder, never the
# developer's database.
# An array, not a function: `"${RUN_ENV[@]}" cmd &` forks cmd itself, so $! is its pid.
RUN_ENV=(env -u DATABASE_URL -u DEEPWORK_MCP_TOKEN -u DEEPWORK_AGENT_ID -u ALLOWED_HOSTS
    DEEPWORK_VAR_DIR="$WORK/var")

# run_target NAME TOKEN BASELINE COMMAND...: start COMMAND (which must listen on $SERVER_PORT
# and serve /mcp behind TOKEN) and the auth proxy, preflight, run the suite with BASELINE as the
# expected failures; sets TARGET_RC.
run_target() {
    local name=$1 token=$2 baseline=$3 rc
    shift 3
    "${RUN_ENV[@]}" "$@" >"$WORK/$name-server.log" 2>&1 &
    SERVER_PID=$!
    CONFORMANCE_PROXY_TOKEN="$token" \
        "$PY" "$HERE/auth_proxy.py" --port "$PROXY_PORT" --upstream-port "$SERVER_PORT" \
        >"$WORK/$name-proxy.log" 2>&1 &
    PROXY_PID=$!
    wait_port "$SERVER_PORT" "$SERVER_PID" "$WORK/$name-server.log" || exit 2
    wait_port "$PROXY_PORT" "$PROXY_PID" "$WORK/$name-proxy.log" || exit 2
    say "$name (pid $SERVER_PID) on :$SERVER_PORT behind the auth proxy (pid $PROXY_PID)" \
        "on :$PROXY_PORT"

    # Preflight: auth is really on (401 without the token), the proxy supplies it, and
    # get_workflows lists the throwaway job.
    "$PY" "$HERE/preflight.py" "$SERVER_PORT" "$PROXY_PORT" "$JOB_NAME" \
        || die "$name: preflight failed (see above)"

    local url="http://127.0.0.1:$PROXY_PORT/mcp" results="$WORK/$name-results"
    mkdir -p "$results"
    say "$name: conformance server --url $url --expected-failures ${baseline#"$ROOT/"}" \
        "${CONFORMANCE_ARGS:-}"
    set +e
    # shellcheck disable=SC2086  # CONFORMANCE_ARGS is split on purpose
    conformance server --url "$url" -o "$results" \
        --expected-failures "$baseline" ${CONFORMANCE_ARGS:-} 2>&1 \
        | tee "$WORK/$name-suite.log"
    rc=${PIPESTATUS[0]}
    set -e

    # Count scenarios from the results, the way the suite judges them for the baseline: a
    # scenario fails when any of its checks is FAILURE or WARNING.
    local passed failed
    read -r passed failed < <(python3 - "$results" <<'PY'
import glob, json, os, sys
passed = failed = 0
for path in glob.glob(os.path.join(sys.argv[1], "*", "checks.json")):
    with open(path) as f:
        statuses = {check.get("status") for check in json.load(f)}
    if statuses & {"FAILURE", "WARNING"}:
        failed += 1
    else:
        passed += 1
print(passed, failed)
PY
)
    if [ "$rc" -eq 0 ]; then
        VERDICTS+=("$name PASS: $passed scenarios passed, $failed failed as baselined")
    else
        VERDICTS+=("$name FAIL: $passed scenarios passed, $failed failed; unexpected failures or stale baseline entries are listed above")
    fi
    stop_pid "$PROXY_PID"
    stop_pid "$SERVER_PID"
    PROXY_PID="" SERVER_PID=""
    TARGET_RC=$rc
}

VERDICTS=()
SERVER_PORT=$(free_port)
PROXY_PORT=$(free_port)
while [ "$PROXY_PORT" = "$SERVER_PORT" ]; do PROXY_PORT=$(free_port); done
ready=$(date +%s)

# 4a. `mcpserve --transport http` (it migrates the fresh database on start).
run_target mcpserve "$TOKEN" "$HERE/baseline.yml" "$PY" manage.py mcpserve --path "$PROJECT" --transport http \
    --port "$SERVER_PORT" --token="$TOKEN"
mcpserve_rc=$TARGET_RC

# 4b. `/mcp` of the ASGI application `make run` serves, with an API token allowed MCP and
# bound to the throwaway project (a user who may drive sessions owns it).
HOSTED_TOKEN=$("${RUN_ENV[@]}" CONFORMANCE_PROJECT="$PROJECT" "$PY" manage.py shell -c '
import os
from pathlib import Path
from django.contrib.auth.models import Permission, User
from accounts.services import api_token_create
from workflows.services.projects import project_add
user = User.objects.create_user("conformance")
user.user_permissions.add(Permission.objects.get(codename="drive_session"))
project = project_add(root_path=str(Path(os.environ["CONFORMANCE_PROJECT"]).resolve())).project
print(api_token_create(user=user, name="conformance", mcp=True, mcp_project=project)[1])
' 2>>"$WORK/hosted-setup.log" | tail -n 1) || die "could not make the hosted token"
# Stateless serving adds the entries of baseline-hosted.yml (each explained there).
HOSTED_BASELINE="$WORK/hosted-baseline.yml"
{ cat "$HERE/baseline.yml"; grep -E '^[[:space:]]+- ' "$HERE/baseline-hosted.yml"; } \
    >"$HOSTED_BASELINE"
run_target hosted "$HOSTED_TOKEN" "$HOSTED_BASELINE" "$ROOT/.venv/bin/uvicorn" deepwork_site.asgi:application \
    --host 127.0.0.1 --port "$SERVER_PORT"
hosted_rc=$TARGET_RC
finished=$(date +%s)

rc=$(( mcpserve_rc != 0 ? mcpserve_rc : hosted_rc ))
for verdict in "${VERDICTS[@]}"; do say "$verdict"; done
say "suite exit codes: mcpserve $mcpserve_rc, hosted $hosted_rc; $((finished - started))s total" \
    "(tooling $((tooled - started))s, servers and suites $((finished - ready))s)"
exit "$rc"
