#!/usr/bin/env bash
# Installs everything the tests need (Python packages, Debian's Chromium, the
# frontend's npm packages) and runs the whole suite. Safe to run again.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"

step() { printf '\n== %s\n' "$*"; }

if [ ! -x "$PY" ]; then
    step "creating $VENV"
    python3 -m venv "$VENV"
fi

step "installing Python test dependencies"
"$PY" -m pip install -q -r requirements-test.txt
# PYTHONWARNINGS: setuptools warns on every editable build, and the warning is noise here.
PYTHONWARNINGS=ignore "$PY" -m pip install -q -e .

if [ ! -x /usr/bin/chromium ]; then
    step "installing Debian's chromium (browser tests)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

if [ -f frontend/package.json ]; then
    step "frontend: install, build, typecheck, test"
    (
        cd frontend
        npm ci --no-audit --no-fund --loglevel=error
        npm run --silent build
        npm run --silent typecheck
        npm test --silent
    )
    step "checking that the committed bundle matches the fresh build"
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        if ! git diff --exit-code --stat -- gradhealth_plugin/static/index.js; then
            echo "gradhealth_plugin/static/index.js differs from the build of frontend/src:" \
                 "run 'npm run build' in frontend/ and commit the bundle" >&2
            exit 1
        fi
    else
        echo "not a git checkout: bundle check skipped"
    fi
fi

step "python tests"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"
# A hung test fails after 5 minutes instead of holding CI to its limit.
"$PY" -m pytest tests -q --durations=15 --timeout=300
