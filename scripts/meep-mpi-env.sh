#!/usr/bin/env bash
# Usage: scripts/meep-mpi-env.sh [VENV]    (default .venv-meep-mpi)
#        scripts/meep-mpi-env.sh --check   (exit 0 when this system can build it)
# A Meep user's MPI environment: Debian's parallel Meep (python3-meep-mpi-default, Open MPI)
# over /usr/bin/python3 with numpy<2 and mpi4py. That package conflicts with the serial
# python3-meep the Meep leg uses (and its library with libmeep30), so it is not installed:
# its two packages are downloaded and unpacked into VENV/meep-mpi, the meep module is copied
# into the venv (ahead of the system's serial one) and pointed at the unpacked library
# (patchelf); the libraries they need, which don't conflict, are installed with apt-get.
# Debian's MPI build has no MPB: eigenmode sources fail there, plain sources work.
set -euo pipefail
cd "$(dirname "$0")/.."
python=/usr/bin/python3
debs=(libmeep-mpi-default30 python3-meep-mpi-default)
libs=(openmpi-bin libopenmpi3 libhdf5-openmpi-103-1 libctl7 libgsl27 libharminv3 libgdsii0
    libfftw3-double3 liblapack3 python3-numpy python3-venv patchelf)
if [ "${1:-}" = "--check" ]; then
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null && [ -x "$python" ] && exit 0
    echo "note: building the MPI Meep environment needs root and apt-get (Debian)" >&2
    exit 3
fi
venv=${1:-.venv-meep-mpi}
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${libs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
unpacked="$venv/meep-mpi"
mkdir -p "$unpacked/debs"
(cd "$unpacked/debs" && apt-get download -qq "${debs[@]}" 2>/dev/null)
for deb in "$unpacked"/debs/*.deb; do dpkg -x "$deb" "$unpacked"; done
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -r "$unpacked/usr/lib/python3/dist-packages/meep" "$site/meep"
lib=$(cd "$(dirname "$(find "$unpacked/usr/lib" -name 'libmeep.so.*' | head -1)")" && pwd)
for so in "$site"/meep/_meep*.so "$site"/meep/*/_*.so; do
    [ -e "$so" ] && patchelf --set-rpath "$lib" "$so"
done
PYTHONWARNINGS=ignore::UserWarning "$venv/bin/python" -m pip install -q "numpy<2" "ipython<9" "mpi4py>=4.0" -e '.[meep,test-core]'
"$venv/bin/python" -c "import meep, numpy; assert meep.with_mpi(), 'not an MPI Meep'; print('Meep', meep.__version__, '(MPI) numpy', numpy.__version__, 'in $venv')" 2>/dev/null | grep -v '^Elapsed run time'  # Meep's own line at exit
