# Sourced by the scripts: create or reuse .venv and keep it in step with pyproject.toml.
# Usage: . scripts/_venv.sh EXTRAS   (e.g. "dev,bench"; empty for the plain package)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-}"
PYTHON_BIN="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON_BIN" -m venv "$VENV"
fi
spec="$ROOT"
[ -n "$EXTRAS" ] && spec="$ROOT[$EXTRAS]"
stamp="$VENV/.contextshift-installed-$(echo "$EXTRAS" | tr ',' '-')"
want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log="$(mktemp)"
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" >&2 || true
    rm -f "$log"
    echo "installing contextshift into $VENV failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
