#!/usr/bin/env bash
# The API against its own OpenAPI document (V1): the schemathesis CLI, every check on, against a real
# `contextshift serve` on a free loopback port, signed in as the admin. Usage: .ci/schemathesis.sh [sqlite|postgresql]
# (sqlite: a fresh file; postgresql: a fresh database on the server of CONTEXTSHIFT_TEST_POSTGRES_URL, dropped
# after). Bounded example counts and a fixed seed keep it to minutes; the only configuration is
# .ci/schemathesis.toml (expected statuses, each with its reason); the response-time limit of --checks all (10 s) is
# raised to 60 s, as a shared 2-core CI machine can be that slow. Two runs against one server:
# - first the stateful phase alone, at 40 examples (SCHEMATHESIS_STATEFUL_EXAMPLES), on the fresh database: at 10,
#   or after the other phases had filled the database, it followed no link at all, so it never reached an object
#   it made; the run fails unless it followed some;
# - then examples, coverage and fuzzing at 10 examples an operation (SCHEMATHESIS_EXAMPLES).
# One worker: with two, their threads race in CPython 3.11.7's AST constructor (gh-106905, fixed in later
# releases) and schemathesis stops on "SystemError: AST constructor recursion depth mismatch" in whichever
# operation comes first. The server is always stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
backend="${1:-sqlite}"
pg_server="${CONTEXTSHIFT_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}"
pg_name="contextshift_schemathesis_$$"
case "$backend" in
  sqlite) database="sqlite:///$work/api.db" ;;
  postgresql)
    psql -q "$pg_server" -c "CREATE DATABASE $pg_name" >/dev/null
    database="${pg_server%/*}/$pg_name" ;;
  *) echo "usage: $0 [sqlite|postgresql]" >&2; exit 2 ;;
esac
port="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
token="cs_ci-schemathesis-$(python -c 'import secrets; print(secrets.token_hex(16))')"
server=""
stop() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  if [ "$backend" = postgresql ]; then
    psql -q "$pg_server" -c "DROP DATABASE IF EXISTS $pg_name WITH (FORCE)" >/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT
# its auth checks send wrong tokens on purpose: the login rate limit (tested in tests/api) must not trip
CONTEXTSHIFT_LOGIN_LIMIT=1000000/minute CONTEXTSHIFT_ADMIN_TOKEN="$token" CONTEXTSHIFT_DATA_DIR="$work/data" \
  contextshift serve --host 127.0.0.1 --port "$port" --database "$database" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 150); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.2
done
started=$(date +%s)
status=0
common=(--config-file .ci/schemathesis.toml run "http://127.0.0.1:$port/openapi.json"
  -H "Authorization: Bearer $token" --checks all --seed 20261201 --workers 1 --no-color
  --request-timeout 60 --max-response-time 60 --generation-database none)
schemathesis "${common[@]}" --phases stateful --max-examples "${SCHEMATHESIS_STATEFUL_EXAMPLES:-40}" \
  --report-dir "$work/report-stateful" | tee "$work/stateful.txt" || status=$?
schemathesis "${common[@]}" --phases examples,coverage,fuzzing --max-examples "${SCHEMATHESIS_EXAMPLES:-10}" \
  --report-dir "$work/report" || status=$?
links="$(sed -n 's/.*API Links: *\([0-9][0-9]*\) covered.*/\1/p' "$work/stateful.txt")"
if [ "${links:-0}" -eq 0 ]; then
  echo "the stateful phase followed no OpenAPI link: it tested no object it made"; status=1
fi
echo "schemathesis on $backend: exit $status in $(( $(date +%s) - started )) s ($links links followed)"
exit "$status"
