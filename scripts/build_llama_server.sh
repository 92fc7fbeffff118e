#!/usr/bin/env bash
# Build llama.cpp's llama-server once, from pinned source, into the cache (idempotent).
#
# Source: the llama.cpp tree vendored in the pinned llama-cpp-python 0.3.16 sdist (llama.cpp commit
# 4227c9b), fetched from PyPI and checked by SHA-256. PyPI has no llama.cpp release tarball of its
# own, and this tree is the one the project's previous engine was measured on.
# Usage: build_llama_server.sh PIP_COMMAND...   (a pip that can also install cmake)
set -euo pipefail

CACHE="${SUBAGENT_LAB_CACHE:-$HOME/.cache/subagent_lab}"
SDIST_VERSION="0.3.16"
SDIST_SHA256="34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6"
BUILD_ID="llama-cpp-python-0.3.16-vendored-4227c9b"   # = subagent_lab.local_models.server.LLAMA_CPP_BUILD
PREFIX="$CACHE/llama.cpp/$BUILD_ID"
PIP=("$@")
log() { printf '[setup] %s\n' "$*" >&2; }
fail() { log "FAILED at step '$1'; log: $2"; tail -n 20 "$2" >&2 || true; exit 1; }

# llama.cpp's AMX kernels crash (SIGSEGV) on these CPUs, and GGML_NATIVE would pick them up:
# a portable AVX2 build, adding AVX-512 only where this CPU has it.
cmake_args=(-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
  -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF)
flavour="avx2"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512_vnni /proc/cpuinfo \
   && grep -qw avx512vbmi /proc/cpuinfo && grep -qw avx512_bf16 /proc/cpuinfo; then
  cmake_args+=(-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON)
  flavour="avx512"
fi

if [ -x "$PREFIX/bin/llama-server" ] && [ "$(cat "$PREFIX/flavour" 2>/dev/null)" = "$flavour" ]; then
  exit 0
fi
mkdir -p "$CACHE/llama.cpp/src"
work="$CACHE/llama.cpp/src"
logfile="$CACHE/llama.cpp/build-$flavour.log"
: > "$logfile"
sdist="$work/llama_cpp_python-$SDIST_VERSION.tar.gz"
if [ ! -f "$sdist" ] || ! echo "$SDIST_SHA256  $sdist" | sha256sum -c --quiet - >/dev/null 2>&1; then
  log "fetching the pinned llama.cpp source (llama-cpp-python $SDIST_VERSION sdist)"
  rm -f "$sdist"
  "${PIP[@]}" download -q --no-deps --no-binary :all: "llama-cpp-python==$SDIST_VERSION" -d "$work" \
    >>"$logfile" 2>&1 || fail "download source" "$logfile"
  echo "$SDIST_SHA256  $sdist" | sha256sum -c --quiet - >>"$logfile" 2>&1 || fail "check source sha256" "$logfile"
fi
src="$work/llama_cpp_python-$SDIST_VERSION"
rm -rf "$src" && tar -xzf "$sdist" -C "$work" || fail "unpack source" "$logfile"

# cmake from PyPI, into the project's environment.
cmake="$(dirname "${PIP[0]}")/cmake"
if [ ! -x "$cmake" ]; then
  "${PIP[@]}" install -q "cmake>=3.28,<4" >>"$logfile" 2>&1 || fail "install cmake" "$logfile"
fi
build="$work/build-$flavour"
log "building llama-server ($flavour, no AMX, server target only); about 10 minutes on 2 cores"
"$cmake" -S "$src/vendor/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}" \
  -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DGGML_OPENMP=OFF >>"$logfile" 2>&1 || fail "cmake configure" "$logfile"
"$cmake" --build "$build" --target llama-server -j "$(nproc)" >>"$logfile" 2>&1 || fail "cmake build" "$logfile"
mkdir -p "$PREFIX/bin"
cp "$build/bin/llama-server" "$PREFIX/bin/llama-server.tmp" && mv "$PREFIX/bin/llama-server.tmp" "$PREFIX/bin/llama-server"
"$PREFIX/bin/llama-server" --version >>"$logfile" 2>&1 || fail "run the built binary" "$logfile"
echo "$flavour" > "$PREFIX/flavour"
rm -rf "$build" "$src"
log "llama-server ready: $PREFIX/bin/llama-server"
