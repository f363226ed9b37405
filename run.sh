#!/usr/bin/env bash
# The two commands of the README, each doing its own set-up:
#   ./run.sh demo [demo options]   install into .venv, then run `tracking-core demo` here
#   ./run.sh test [pytest options] install into .venv, then run ruff, mypy and the whole test suite
#   ./run.sh test-fast [options]   install into .venv, then run the delivery core's in-process tests
#                                  (tests/fast: fakes, no servers, no subprocesses; seconds)
#   ./run.sh ui [RUN] [options]    open a run (default: the latest under ./tracking-runs) in the
#                                  MLflow UI and TensorBoard, as `tracking-core ui`
# The virtual environment lives in the checkout; the demo runs in the directory you call it
# from (its data goes to ./tracking-runs there, and a relative --tracking-dir means there).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")" && pwd)

PYTHON=${PYTHON:-python3}
VENV=${TRACKING_CORE_VENV:-$ROOT/.venv}

# One pip step: its lines go whole to $VENV/pip-install.log; the terminal gets one line per
# package collected and per install step, and a line at least every 15 s while it shows
# nothing else (a large download, the install itself). A failure shows the log's path and its
# last lines.
pip_step() {
    local what=$1 log="$VENV/pip-install.log" started=$SECONDS said=$SECONDS line n
    shift
    echo "==> $what"
    { "$VENV/bin/python" -m pip install --progress-bar off "$@" 2>&1; echo "__pip_exit $?"; } |
    while true; do
        if IFS= read -r -t 5 line; then
            echo "$line" >> "$log"
            case $line in
                "__pip_exit 0") exit 0 ;;
                "__pip_exit "*)
                    echo "./run.sh: pip failed (${line#__pip_exit }): $what; its log: $log, ending with:" >&2
                    tail -n 20 "$log" | sed 's/^/  /' >&2
                    exit 1 ;;
                Collecting*) line=${line#Collecting }; echo "    ${line%% (from *}"; said=$SECONDS ;;
                Processing*) line=${line%% (from *}; echo "    ${line##*/}"; said=$SECONDS ;;
                "Installing collected packages: "*)
                    n=$(tr -cd , <<< "$line" | wc -c)
                    echo "    installing $((n + 1)) package(s)"; said=$SECONDS ;;
                "Successfully installed "*)
                    echo "    done: ${line#Successfully installed }" | cut -c1-160; said=$SECONDS ;;
            esac
        elif [ $? -le 128 ]; then
            exit 1  # pip's output ended without its status: the pipe broke
        fi
        if [ $((SECONDS - said)) -ge 15 ]; then
            echo "    ... ($((SECONDS - started)) s)"
            said=$SECONDS
        fi
    done
}

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        echo "==> creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local stamp="$VENV/.tracking-core-installed"
    local want
    want=$(sha256sum < "$ROOT/pyproject.toml" | cut -c1-16)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "==> installing tracking-core and its extras into $VENV (first run: a few minutes; pip's whole output: $VENV/pip-install.log)"
        pip_step "pip itself" --upgrade pip
        # torch first, pinned: the CPU wheel, not a multi-GB CUDA build
        pip_step "torch 2.13.0" "torch==2.13.0"
        pip_step "tracking-core with its extras" -e "$ROOT[all,test]"
        echo "$want" > "$stamp"
    fi
    # The project's own modules compiled once: an editable install has no bytecode of them, and
    # where PYTHONDONTWRITEBYTECODE is set every process would compile them again (about 0.1 s of
    # CPU a process for tracking-core alone; the demo and the tests start hundreds).
    (cd "$ROOT" && "$VENV/bin/python" -m compileall -q -j 0 tracking_core plugins slime_integration verl_integration tests >/dev/null) || true
}

USAGE="usage: ./run.sh demo [options] | ./run.sh ui [RUN] [options] | ./run.sh test [pytest options] | ./run.sh test-fast [pytest options]"
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
        # The clock-skew tests shift a simulated node's clock with libfaketime.
        if ! command -v faketime >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "./run.sh: installing faketime (apt-get) for the clock-skew tests" >&2
            { apt-get install -y -qq faketime || { apt-get update -qq && apt-get install -y -qq faketime; }; } >/dev/null 2>&1 \
                || echo "./run.sh: faketime could not be installed: the clock-skew tests will be skipped" >&2
        fi
        "$VENV/bin/ruff" check .
        "$VENV/bin/mypy"  # the core and the tests' job files (tests/jobs), with the settings in setup.cfg
        # Two workers (pytest-xdist): most tests wait on servers, subprocesses and sleeps, but
        # more workers than cores overload a 2-core machine into missed deadlines.
        # tests/conftest.py keeps shared set-ups and Ray clusters each on one worker and starts
        # the longest tests first. `./run.sh test -n 0` runs them in one process.
        exec "$VENV/bin/python" -m pytest -q -n 2 "$@"
        ;;
    test-fast)
        setup
        cd "$ROOT"
        exec "$VENV/bin/python" -m pytest -q tests/fast "$@"
        ;;
    -h|--help|help)
        echo "$USAGE"
        ;;
    "")
        echo "$USAGE" >&2
        exit 2
        ;;
    *)
        echo "./run.sh: unknown command '$cmd' (the commands: demo, ui, test, test-fast)" >&2
        echo "$USAGE" >&2
        exit 2
        ;;
esac
