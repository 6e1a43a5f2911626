# Sourced by the scripts: create or reuse .venv and keep it in step with pyproject.toml.
# Usage: . scripts/_venv.sh EXTRAS [progress]   (EXTRAS e.g. "dev,bench"; empty for the plain package)
# With "progress", say on standard error what is being set up and how long it took (scripts/run does: a first
# install takes one to three minutes and would otherwise look hung); without it, print nothing unless it fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-}"
PROGRESS="${2:-}"
PYTHON_BIN="${PYTHON:-python3}"
_venv_say() {
  if [ "$PROGRESS" = progress ]; then echo "$*" >&2; fi
}
if [ ! -x "$VENV/bin/python" ]; then
  _venv_say "creating $VENV with $PYTHON_BIN (first run)…"
  "$PYTHON_BIN" -m venv "$VENV"
fi
spec="$ROOT"
[ -n "$EXTRAS" ] && spec="$ROOT[$EXTRAS]"
stamp="$VENV/.contextshift-installed-$(echo "$EXTRAS" | tr ',' '-')"
want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if [ -f "$stamp" ]; then
    _venv_say "pyproject.toml changed: reinstalling contextshift into $VENV…"
  else
    _venv_say "installing contextshift and its dependencies into $VENV (first run: one to three minutes)…"
  fi
  install_started=$SECONDS
  log="$(mktemp)"
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" >&2 || true
    rm -f "$log"
    echo "installing contextshift into $VENV failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
  _venv_say "installed in $(( SECONDS - install_started )) s"
fi
export PATH="$VENV/bin:$PATH"
