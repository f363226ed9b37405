#!/usr/bin/env bash
# The two commands of the README, each doing its own set-up:
#   ./run.sh demo [demo options]   install into .venv, then run `tracking-core demo` here
#   ./run.sh test [pytest options] install into .venv, then run ruff, mypy and the whole test suite
#   ./run.sh ui [RUN] [options]    open a run (default: the latest under ./tracking-runs) in the
#                                  MLflow UI and TensorBoard, as `tracking-core ui`
# The virtual environment lives in the checkout; the demo runs in the directory you call it
# from (its data goes to ./tracking-runs there, and a relative --tracking-dir means there).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")" && pwd)

PYTHON=${PYTHON:-python3}
VENV=${TRACKING_CORE_VENV:-$ROOT/.venv}

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        echo "==> creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local stamp="$VENV/.tracking-core-installed"
    local want
    want=$(sha256sum < "$ROOT/pyproject.toml" | cut -c1-16)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "==> installing tracking-core and its extras into $VENV (first run: a few minutes)"
        "$VENV/bin/python" -m pip install -q --upgrade pip
        # torch first, pinned: the CPU wheel, not a multi-GB CUDA build
        "$VENV/bin/python" -m pip install -q "torch==2.13.0"
        "$VENV/bin/python" -m pip install -q -e "$ROOT[all,test]"
        echo "$want" > "$stamp"
    fi
}

USAGE="usage: ./run.sh demo [options] | ./run.sh ui [RUN] [options] | ./run.sh test [pytest options]"
cmd=${1:-}
shift || true
case "$cmd" in
    demo)
        setup
        exec "$VENV/bin/tracking-core" demo "$@"
        ;;
    ui)
        # a viewer of a run the demo made: the environment exists already (set up if not)
        [ -x "$VENV/bin/tracking-core" ] || setup
        exec "$VENV/bin/tracking-core" ui "$@"
        ;;
    test)
        setup
        cd "$ROOT"
        "$VENV/bin/ruff" check .
        "$VENV/bin/mypy"  # the core, with the settings in setup.cfg
        exec "$VENV/bin/python" -m pytest -q "$@"
        ;;
    -h|--help|help)
        echo "$USAGE"
        ;;
    "")
        echo "$USAGE" >&2
        exit 2
        ;;
    *)
        echo "./run.sh: unknown command '$cmd' (the commands: demo, ui, test)" >&2
        echo "$USAGE" >&2
        exit 2
        ;;
esac
