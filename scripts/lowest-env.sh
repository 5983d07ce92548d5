#!/usr/bin/env bash
# Usage: scripts/lowest-env.sh [VENV]   (default .venv-lowest)
# A venv with the lowest versions pyproject.toml allows for the project's direct dependencies
# and its search extra (uv's `--resolution lowest-direct`; what they pull in comes at its
# newest), plus the tools the tests run with. `make test` runs the tests not marked slow and
# one real sweep there, so that a floor in pyproject.toml is a version that was tested.
# The resolved versions are written to VENV/lowest.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv-lowest}
uv=${UV:-.venv/bin/uv}
# the system's CA store, as pip uses: behind a TLS-inspecting proxy uv's own roots fail
export UV_NATIVE_TLS=1
rm -rf "$venv"
"$uv" venv -q --python "${PYTHON:-python3}" "$venv"
"$uv" pip compile -q pyproject.toml --extra search --resolution lowest-direct --no-header \
    --python "$venv/bin/python" -o "$venv/lowest.txt"
"$uv" pip install -q --python "$venv/bin/python" -c "$venv/lowest.txt" -e '.[search,test-core]'
echo "lowest stack in $venv:" $(grep -E '^(dask|distributed|xarray|zarr|numpy|jax|pydantic|optuna)==' "$venv/lowest.txt")
