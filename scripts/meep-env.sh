#!/usr/bin/env bash
# Usage: scripts/meep-env.sh [VENV]    (default .venv-meep)
#        scripts/meep-env.sh --check   (exit 0 when the system Python has Meep)
# A Meep user's environment: Meep comes from the system (Debian's python3-meep, built for
# /usr/bin/python3 against numpy 1.x), so this is a venv over that Python with its site
# packages, numpy<2 (numpy 2 would break Meep's compiled extension), autograd (which
# meep.adjoint imports even for its JAX wrapper), and this project installed into it.
# IPython stays below 9 there: Debian 12's matplotlib (3.6) calls IPython's backend2gui, which
# IPython 9 removed, so plotting in a notebook kernel of that environment fails without it.
# matplotlib-inline stays below 0.2 there too: 0.2 calls rcParams._get, which matplotlib 3.6
# lacks, so the inline backend of a notebook kernel fails ('RcParams' object has no attribute '_get').
# MEEP_PYTHON picks another Python that has Meep.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${MEEP_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import meep" >/dev/null 2>&1; then
    echo "note: $python has no Meep: install it (Debian: apt-get install python3-meep python3-matplotlib," \
        "which scripts/system-deps.sh does as root) or set MEEP_PYTHON" >&2
    exit 3
fi
[ "${1:-}" = "--check" ] && exit 0
venv=${1:-.venv-meep}
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
PYTHONWARNINGS=ignore::UserWarning "$venv/bin/python" -m pip install -q "numpy<2" "ipython<9" "matplotlib-inline<0.2" -e '.[meep,test-core]'
"$venv/bin/python" -c "import numpy, jax, meep; print('Meep', meep.__version__, 'numpy', numpy.__version__, 'jax', jax.__version__, 'in $venv')" 2>/dev/null | grep -v '^Elapsed run time'  # Meep's own line at exit
