#!/usr/bin/env bash
# Cross-compiles the NEON kernels' standalone self-test (tests/kernels/neon_selftest.cpp) for
# AArch64 with Debian's toolchain and runs it under qemu-user, once per emulated CPU below.
# Needs g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh installs them); installs nothing.
# The binary is static, so qemu needs no AArch64 sysroot. Exits non-zero on any failure.
#
# The self-test links only the kernels sources and the std-only core files they use (no fmt,
# no GoogleTest: the host's -dev packages are x86-64 only), with the kernels library's flags
# (-ffp-contract=off keeps the scalar oracle bit-exact on FMA hardware).
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${AARCH64_CXX:-aarch64-linux-gnu-g++}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
OUT=build/aarch64
for tool in "$CXX" "$QEMU"; do
  command -v "$tool" >/dev/null || { echo "test-aarch64: $tool not found (run scripts/setup.sh)" >&2; exit 1; }
done

sources=(
  src/core/check.cpp src/core/dtype.cpp
  src/kernels/isa.cpp src/kernels/quant_traits.cpp src/kernels/quants_legacy.cpp src/kernels/quants_k.cpp
  src/kernels/quants_k_quantize.cpp src/kernels/kernels_neon.cpp
  tests/kernels/neon_selftest.cpp
)
flags=(-std=c++20 -O2 -g0 -Wall -Wextra -ffp-contract=off -DEDGELM_HAVE_NEON_KERNELS -Isrc)

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

# cortex-a53: a plain ARMv8.0 core (no dotprod); max: every feature qemu emulates.
status=0
for cpu in cortex-a53 max; do
  echo "test-aarch64: running under $QEMU -cpu $cpu"
  if ! "$QEMU" -cpu "$cpu" "$OUT/neon_selftest"; then
    echo "test-aarch64: FAILED on -cpu $cpu" >&2
    status=1
  fi
done
echo "test-aarch64: done in $(( $(date +%s) - start ))s"
exit $status
