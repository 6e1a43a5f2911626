#!/usr/bin/env bash
# The API against its own OpenAPI document (V1): the schemathesis CLI, every check on, against a real
# `contextshift serve` on a free loopback port, signed in as the admin. Usage: .ci/schemathesis.sh [sqlite|postgresql]
# (sqlite: fresh files; postgresql: fresh databases on the server of CONTEXTSHIFT_TEST_POSTGRES_URL, dropped after).
# Bounded example counts and a fixed seed keep it to minutes; the only configuration is .ci/schemathesis.toml
# (expected statuses, each with its reason); the response-time limit of --checks all (10 s) is raised to 60 s, as a
# shared 2-core CI machine can be that slow. Two runs, each on a server and database of its own:
# - the stateful phase alone, at 40 examples (SCHEMATHESIS_STATEFUL_EXAMPLES): at 10 it followed no link at all, so
#   it never reached an object it made; the run fails unless it followed some. Its own server, because it may end
#   its own credentials (GET /tokens links to DELETE /tokens/{token_id}, the admin's own token among them): run
#   before the others on one server it left 55 of 58 operations answering only 401;
# - examples, coverage and fuzzing at 10 examples an operation (SCHEMATHESIS_EXAMPLES).
# One worker: with two, their threads race in CPython 3.11.7's AST constructor (gh-106905, fixed in later
# releases) and schemathesis stops on "SystemError: AST constructor recursion depth mismatch" in whichever
# operation comes first. Every server is stopped and every database dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
backend="${1:-sqlite}"
case "$backend" in sqlite | postgresql) ;; *) echo "usage: $0 [sqlite|postgresql]" >&2; exit 2 ;; esac
pg_server="${CONTEXTSHIFT_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/test}"
servers=()
pg_names=()
stop() {
  for server in "${servers[@]}"; do
    if kill -0 "$server" 2>/dev/null; then
      kill "$server" 2>/dev/null || true
      wait "$server" 2>/dev/null || true
    fi
  done
  for name in "${pg_names[@]}"; do
    psql -q "$pg_server" -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null || true
  done
  rm -rf "$work"
}
trap stop EXIT

# serve NAME: a fresh database and `contextshift serve` on it; sets $url and $token
serve() {
  local name="$1" database port
  if [ "$backend" = postgresql ]; then
    pg_names+=("contextshift_schemathesis_${name}_$$")
    psql -q "$pg_server" -c "CREATE DATABASE ${pg_names[-1]}" >/dev/null
    database="${pg_server%/*}/${pg_names[-1]}"
  else
    database="sqlite:///$work/$name.db"
  fi
  port="$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  token="cs_ci-schemathesis-$(python -c 'import secrets; print(secrets.token_hex(16))')"
  # its auth checks send wrong tokens on purpose: the login rate limit (tested in tests/api) must not trip
  CONTEXTSHIFT_LOGIN_LIMIT=1000000/minute CONTEXTSHIFT_ADMIN_TOKEN="$token" CONTEXTSHIFT_DATA_DIR="$work/data-$name" \
    contextshift serve --host 127.0.0.1 --port "$port" --database "$database" >"$work/serve-$name.log" 2>&1 &
  servers+=($!)
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    kill -0 "${servers[-1]}" 2>/dev/null || { cat "$work/serve-$name.log"; exit 1; }
    sleep 0.2
  done
  url="http://127.0.0.1:$port"
}

# check NAME ARGS...: schemathesis against $url, every check on; its output also goes to $work/NAME.txt
check() {
  local name="$1"
  shift
  schemathesis --config-file .ci/schemathesis.toml run "$url/openapi.json" -H "Authorization: Bearer $token" \
    --checks all --seed 20261201 --workers 1 --no-color --request-timeout 60 --max-response-time 60 \
    --generation-database none --report-dir "$work/report-$name" "$@" | tee "$work/$name.txt"
}

started=$(date +%s)
status=0
serve stateful
check stateful --phases stateful --max-examples "${SCHEMATHESIS_STATEFUL_EXAMPLES:-40}" || status=$?
links="$(sed -n 's/.*API Links: *\([0-9][0-9]*\) covered.*/\1/p' "$work/stateful.txt")"
if [ "${links:-0}" -eq 0 ]; then
  echo "the stateful phase followed no OpenAPI link: it tested no object it made"; status=1
fi
serve phases
check phases --phases examples,coverage,fuzzing --max-examples "${SCHEMATHESIS_EXAMPLES:-10}" || status=$?
echo "schemathesis on $backend: exit $status in $(( $(date +%s) - started )) s ($links links followed)"
exit "$status"
