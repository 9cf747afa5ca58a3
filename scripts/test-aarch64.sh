#!/usr/bin/env bash
# Cross-compiles the NEON kernels' standalone self-test (tests/kernels/neon_selftest.cpp) for
# AArch64 with Debian's toolchain and runs it under qemu-user, once per emulated CPU below.
# Needs g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh installs them); installs nothing.
# The binary is static, so qemu needs no AArch64 sysroot. Exits non-zero on any failure.
#
# The self-test links only the kernels sources and the core files they use (no GoogleTest: the
# host's -dev packages are x86-64 only), with the kernels library's flags (-ffp-contract=off
# keeps the scalar oracle bit-exact on FMA hardware). core/result.h needs fmt: its headers are
# architecture-independent, so they are used header-only (-DFMT_HEADER_ONLY) from a directory
# that holds only a link to the host's /usr/include/fmt (not the host's other headers).
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${AARCH64_CXX:-aarch64-linux-gnu-g++}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
OUT=build/aarch64
for tool in "$CXX" "$QEMU"; do
  command -v "$tool" >/dev/null || { echo "test-aarch64: $tool not found (run scripts/setup.sh)" >&2; exit 1; }
done

sources=(
  src/core/check.cpp src/core/dtype.cpp src/core/thread_pool.cpp
  src/kernels/isa.cpp src/kernels/quant_traits.cpp src/kernels/quants_legacy.cpp src/kernels/quants_k.cpp
  src/kernels/quants_k_quantize.cpp src/kernels/kernels_neon.cpp src/kernels/gemm_neon.cpp src/kernels/matmul.cpp
  tests/kernels/neon_selftest.cpp
)
FMT_DIR=${FMT_INCLUDE_DIR:-/usr/include/fmt}
[ -f "$FMT_DIR/format.h" ] || { echo "test-aarch64: fmt headers not found in $FMT_DIR (libfmt-dev)" >&2; exit 1; }
mkdir -p "$OUT/include"
ln -sfn "$FMT_DIR" "$OUT/include/fmt"
flags=(-std=c++20 -O2 -g0 -Wall -Wextra -ffp-contract=off -DEDGELM_HAVE_NEON_KERNELS -DFMT_HEADER_ONLY -Isrc
       -isystem "$OUT/include")

start=$(date +%s)
mkdir -p "$OUT/obj"
# Two compiles at a time; each object is rebuilt only when its source or a header is newer.
objs=()
pids=()
for src in "${sources[@]}"; do
  obj="$OUT/obj/$(echo "$src" | tr / _).o"
  objs+=("$obj")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find src tests/kernels -name '*.h' -newer "$obj" -print -quit)" ]; then
    "$CXX" "${flags[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
"$CXX" -static -o "$OUT/neon_selftest" "${objs[@]}"
echo "test-aarch64: built $OUT/neon_selftest in $(( $(date +%s) - start ))s"

# CPU models and the GEMM levels each must run (a level a CPU lacks prints SKIPPED; one listed
# here and missing fails): cortex-a53, plain ARMv8.0; cortex-a76, ARMv8.2 with dotprod; max,
# every feature qemu emulates (dotprod and i8mm).
status=0
for spec in cortex-a53:base cortex-a76:base,dotprod max:base,dotprod,i8mm; do
  cpu=${spec%%:*}
  echo "test-aarch64: running under $QEMU -cpu $cpu (GEMM levels expected: ${spec#*:})"
  if ! "$QEMU" -cpu "$cpu" "$OUT/neon_selftest" --expect "${spec#*:}"; then
    echo "test-aarch64: FAILED on -cpu $cpu" >&2
    status=1
  fi
done
echo "test-aarch64: done in $(( $(date +%s) - start ))s"
exit $status
