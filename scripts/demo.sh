#!/usr/bin/env bash
# Installs the plugin and starts TensorBoard on the bundled demo runs with the
# Gradient Health tab: http://127.0.0.1:${PORT:-6006}/#gradhealth
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
VENV="$ROOT/.venv"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# The tab itself needs only tensorboard, numpy and werkzeug (setup.py's install_requires).
# PYTHONWARNINGS: setuptools warns on every editable build, and the warning is noise here.
PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install -q -e .

PORT="${PORT:-6006}"
echo "Gradient Health: http://127.0.0.1:$PORT/#gradhealth  (Ctrl-C stops TensorBoard)"
exec "$VENV/bin/tensorboard" --logdir demo/runs --host 127.0.0.1 --port "$PORT"
