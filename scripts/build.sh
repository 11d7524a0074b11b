#!/usr/bin/env bash
# scripts/build.sh: builds sluice out of tree into _build/ (or $SLUICE_BUILD_DIR).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${SLUICE_BUILD_DIR:-$top/_build}
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ]; then
	"$top/configure" -q ${SLUICE_CONFIGURE_FLAGS:-}
fi
make -s -j"$(nproc)" >/dev/null
echo "built $build/sluice"
