#!/usr/bin/env bash
# Create (or update) the virtual environment mmtnt runs in.
#
# Usage: bash tools/setup_env.sh [VENV_DIR]      (default: .venv)
#
# Steps, each skipped when already done:
#   1. torch 2.15.0 + torchvision 0.29.2 from the package index;
#   2. mmcv 2.1.0 built from source with its ops, its build flags patched
#      for the C++20 that torch >= 2.14 requires
#      (tools/patches/mmcv-2.1.0-cxx20.patch). The built wheel is kept in
#      ${MMTNT_WHEEL_CACHE:-~/.cache/mmtnt/wheels}/torch-<torch build>, so a
#      second set-up on the same machine installs it in seconds instead of
#      rebuilding (about 20 minutes on 2 cores);
#   3. the rest of the stack (requirements/runtime.txt, requirements/tests.txt)
#      and mmtnt itself in editable mode;
#   4. the Fashion-MNIST files of the embedded demo (Debian package
#      dataset-fashion-mnist) and qemu-user (the tests run INT8 graphs on
#      an emulated AVX2 CPU) when they are missing and apt-get is usable.
#
# pip runs without its configuration files (PIP_CONFIG_FILE=/dev/null): a
# machine's pip configuration may cap torch below 2.15 or point at a local
# CPU-only torch wheel that cannot import any torchvision. pip's environment
# variables still apply: give a package mirror as PIP_INDEX_URL.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-"$ROOT/.venv"}
WHEEL_CACHE=${MMTNT_WHEEL_CACHE:-"$HOME/.cache/mmtnt/wheels"}
# The tested stack; MMTNT_TORCH and MMTNT_TORCHVISION pick another pair
# (e.g. 2.13.0 and 0.28.0; see the README, "Install").
TORCH_VERSION=${MMTNT_TORCH:-2.15.0}
TORCHVISION_VERSION=${MMTNT_TORCHVISION:-0.29.2}
MMCV_VERSION=2.1.0

log() { echo "[setup_env] $*"; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtual environment in $VENV"
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=(env PIP_CONFIG_FILE=/dev/null "$PY" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip wheel ninja

installed_version() {
    "$PY" - "$1" <<'PYEOF'
import sys
from importlib import metadata
try:
    print(metadata.version(sys.argv[1]))
except metadata.PackageNotFoundError:
    print('')
PYEOF
}

# 1. torch + torchvision from the package index.
if ! "$PY" -c "import torch, torchvision; assert torch.__version__.startswith('$TORCH_VERSION')" 2>/dev/null; then
    log "installing torch $TORCH_VERSION and torchvision $TORCHVISION_VERSION"
    "${PIP[@]}" install -q "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
fi
TORCH_TAG=$("$PY" -c "import torch; print(torch.__version__)")

# 2. mmcv with compiled ops, built once per torch build and cached.
if [ "$(installed_version mmcv)" != "$MMCV_VERSION" ] || ! "$PY" -c "import mmcv.ops" 2>/dev/null; then
    cache="$WHEEL_CACHE/torch-$TORCH_TAG"
    wheel=$(ls "$cache"/mmcv-"$MMCV_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        log "building mmcv $MMCV_VERSION with ops (about 20 minutes on 2 cores); cached in $cache"
        mkdir -p "$cache"
        build=$(mktemp -d "$cache/build.XXXXXX")
        trap 'rm -rf "$build"' EXIT
        # mmcv 2.1.0's setup.py imports pkg_resources, gone from setuptools 70.
        "${PIP[@]}" install -q 'setuptools<70'
        "${PIP[@]}" download -q --no-deps --no-binary mmcv --no-build-isolation \
            -d "$build" "mmcv==$MMCV_VERSION"
        tar -xzf "$build/mmcv-$MMCV_VERSION.tar.gz" -C "$build"
        patch -s -d "$build/mmcv-$MMCV_VERSION" -p1 < "$ROOT/tools/patches/mmcv-$MMCV_VERSION-cxx20.patch"
        MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} \
            "${PIP[@]}" wheel -q --no-build-isolation --no-deps \
            -w "$build/wheel" "$build/mmcv-$MMCV_VERSION"
        # Into the cache by a rename: a set-up killed mid-build leaves no
        # wheel there, and one running beside it reads a whole file or none.
        built=$(ls "$build"/wheel/mmcv-"$MMCV_VERSION"-*.whl)
        wheel="$cache/$(basename "$built")"
        mv "$built" "$wheel"
    else
        log "installing cached $wheel"
    fi
    "${PIP[@]}" install -q "$wheel"
fi

# 3. The rest of the stack and mmtnt itself.
log "installing the OpenMMLab stack, test requirements and mmtnt"
"${PIP[@]}" install -q -r "$ROOT/requirements/runtime.txt" -r "$ROOT/requirements/tests.txt" \
    "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" "mmcv==$MMCV_VERSION"
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

# 4. Debian packages: Fashion-MNIST for the embedded demo, and qemu-user,
#    whose emulated AVX2 CPU runs the INT8 graphs in the tests as a CPU
#    without VNNI does (tests/test_tools/test_quantize.py).
missing=()
if ! dpkg -s dataset-fashion-mnist >/dev/null 2>&1 && [ ! -d "$ROOT/data/fashion_mnist" ]; then
    missing+=(dataset-fashion-mnist)
fi
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
    missing+=(qemu-user)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        log "installing Debian packages ${missing[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    else
        log "Debian packages ${missing[*]} not installed (needs apt-get as root):" \
            "see docs/datasets.md (Fashion-MNIST) to place the files under data/fashion_mnist;" \
            "without qemu-user the INT8 test on an emulated AVX2 CPU is skipped"
    fi
fi

"$PY" -c "import mmdet.models, mmseg.models, mmpretrain.models, mmtnt, torch, mmcv.ops; \
print('[setup_env] ready: torch', torch.__version__, '| mmcv', mmcv.__version__)"
