#!/usr/bin/env bash
# `make conformance`: run the official MCP conformance suite (@modelcontextprotocol/conformance)
# against `manage.py mcpserve --transport http`.
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
#      baseline.yml as the expected failures. Both processes are killed on exit.
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
# Exit code: the suite's own. 0 when only scenarios listed in baseline.yml fail; 1 on any other
# failure or on a stale baseline entry (a listed scenario that now passes). 2 for a setup error.
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
        say "kept $WORK (server.log, proxy.log, suite.log, results/)"
    fi
    exit "$rc"
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/deepwork-conformance.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PROJECT="$WORK/project"
JOB="$PROJECT/.deepwork/jobs/$JOB_NAME"
mkdir -p "$JOB/steps" "$WORK/var" "$WORK/results"
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

SERVER_PORT=$(free_port)
PROXY_PORT=$(free_port)
while [ "$PROXY_PORT" = "$SERVER_PORT" ]; do PROXY_PORT=$(free_port); done
TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')

cd "$ROOT"
# DATABASE_URL unset + DEEPWORK_VAR_DIR: a fresh SQLite file in the work folder (migrated by
# mcpserve on start), never the developer's database.
env -u DATABASE_URL -u DEEPWORK_MCP_TOKEN -u DEEPWORK_AGENT_ID \
    DEEPWORK_VAR_DIR="$WORK/var" \
    "$PY" manage.py mcpserve --path "$PROJECT" --transport http \
    --port "$SERVER_PORT" --token="$TOKEN" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
CONFORMANCE_PROXY_TOKEN="$TOKEN" \
    "$PY" "$HERE/auth_proxy.py" --port "$PROXY_PORT" --upstream-port "$SERVER_PORT" \
    >"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
wait_port "$SERVER_PORT" "$SERVER_PID" "$WORK/server.log" || exit 2
wait_port "$PROXY_PORT" "$PROXY_PID" "$WORK/proxy.log" || exit 2
say "mcpserve (pid $SERVER_PID) on :$SERVER_PORT behind the auth proxy (pid $PROXY_PID)" \
    "on :$PROXY_PORT"

# Preflight: auth is really on (401 without the token), the proxy supplies it, and
# get_workflows lists the throwaway job.
"$PY" "$HERE/preflight.py" "$SERVER_PORT" "$PROXY_PORT" "$JOB_NAME" \
    || die "preflight failed (see above)"
ready=$(date +%s)

# --- 4. The suite ---------------------------------------------------------------------------
URL="http://127.0.0.1:$PROXY_PORT/mcp"
say "running: conformance server --url $URL --expected-failures tests/conformance/baseline.yml" \
    "${CONFORMANCE_ARGS:-}"
set +e
# shellcheck disable=SC2086  # CONFORMANCE_ARGS is split on purpose
conformance server --url "$URL" -o "$WORK/results" \
    --expected-failures "$HERE/baseline.yml" ${CONFORMANCE_ARGS:-} 2>&1 | tee "$WORK/suite.log"
rc=${PIPESTATUS[0]}
set -e
finished=$(date +%s)

# Count scenarios from the results, the way the suite judges them for the baseline: a scenario
# fails when any of its checks is FAILURE or WARNING.
read -r passed failed < <(python3 - "$WORK/results" <<'PY'
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
    verdict="PASS: $passed scenarios passed, $failed failed as baselined"
else
    verdict="FAIL: $passed scenarios passed, $failed failed; unexpected failures or stale"
    verdict="$verdict baseline entries are listed above"
fi
say "$verdict; suite exit code $rc; $((finished - started))s total" \
    "(tooling $((tooled - started))s, server start $((ready - tooled))s, suite $((finished - ready))s)"
exit "$rc"
