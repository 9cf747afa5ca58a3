#!/usr/bin/env bash
# Cross-compiles the NEON kernels' standalone self-test (tests/kernels/neon_selftest.cpp) and one
# golden run through the NEON path (tests/kernels/neon_golden.cpp: stories260K greedy text
# against shared/golden/greedy.json) for AArch64 with Debian's toolchain and runs both under
# qemu-user, once per emulated CPU below (the golden with the matrices packed at load), and the
# golden once more with EDGELM_PACK=0 (the unpacked paths).
# Needs g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh installs them); installs nothing.
# The binary is static, so qemu needs no AArch64 sysroot. Exits non-zero on any failure.
#
# The golden program also links the core, format, model and SentencePiece tokenizer sources
# (reference forward, no engine); it reads the shared data from EDGELM_TEST_DATA (default
# /work/shared). nlohmann/json is used header-only like fmt.
# The self-test links only the kernels sources and the core files they use, plus the sampler's
# vectorized logit scans with their check (no GoogleTest: the
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
  src/kernels/quants_k_quantize.cpp src/kernels/quants_weighted.cpp src/kernels/quants_iq3s_quantize.cpp
  src/kernels/quants_iq2xs_quantize.cpp src/kernels/quants_iq2xxs_quantize.cpp src/kernels/quants_iq2s_quantize.cpp
  src/kernels/quants_iq3xxs_quantize.cpp src/kernels/quants_iq1_quantize.cpp src/kernels/quants_iq4.cpp src/kernels/quants_iq_grid.cpp src/kernels/quants_ternary.cpp
  src/kernels/quants_fp4.cpp src/kernels/kernels_neon.cpp src/kernels/kernels_neon_legacy.cpp
  src/kernels/kernels_neon_k.cpp src/kernels/kernels_neon_lowbit.cpp src/kernels/kernels_neon_iqgrid.cpp src/kernels/gemm_neon.cpp src/kernels/matmul.cpp
  src/kernels/attention_kernels.cpp src/kernels/attention_neon.cpp src/kernels/ops_vector.cpp
  src/kernels/ops_neon.cpp
  tests/kernels/neon_selftest.cpp tests/kernels/neon_attention_check.cpp tests/kernels/vector_ops_check.cpp
  tests/kernels/neon_packed_check.cpp tests/kernels/neon_lowbit_check.cpp
  tests/kernels/neon_iqgrid_check.cpp
  src/sample/candidates.cpp src/sample/logit_scan.cpp tests/sample/logit_scan_check.cpp
)
golden_sources=(
  src/core/log.cpp src/core/mmap_file.cpp src/core/byte_size.cpp src/core/huge_pages.cpp
  src/format/gguf_value.cpp src/format/gguf_reader.cpp src/format/llama2c.cpp src/format/model_file.cpp
  src/kernels/dequantize.cpp
  src/model/arch.cpp src/model/weights.cpp src/model/model.cpp src/model/ops.cpp src/model/rope_table.cpp
  src/model/forward.cpp src/model/deltanet.cpp src/model/deltanet_chunked.cpp src/model/ple.cpp src/model/mrope.cpp
  src/tokenizer/vocab.cpp src/tokenizer/special_split.cpp src/tokenizer/spm.cpp src/tokenizer/utf8.cpp
  tests/kernels/neon_golden.cpp
)
DATA=${EDGELM_TEST_DATA:-/work/shared}
FMT_DIR=${FMT_INCLUDE_DIR:-/usr/include/fmt}
[ -f "$FMT_DIR/format.h" ] || { echo "test-aarch64: fmt headers not found in $FMT_DIR (libfmt-dev)" >&2; exit 1; }
mkdir -p "$OUT/include"
ln -sfn "$FMT_DIR" "$OUT/include/fmt"
JSON_DIR=${NLOHMANN_INCLUDE_DIR:-/usr/include/nlohmann}
[ -f "$JSON_DIR/json.hpp" ] || { echo "test-aarch64: nlohmann/json not found in $JSON_DIR (nlohmann-json3-dev)" >&2; exit 1; }
ln -sfn "$JSON_DIR" "$OUT/include/nlohmann"
flags=(-std=c++20 -O2 -g0 -Wall -Wextra -ffp-contract=off -DEDGELM_HAVE_NEON_KERNELS -DFMT_HEADER_ONLY -Isrc
       -isystem "$OUT/include")

start=$(date +%s)
mkdir -p "$OUT/obj"
# Two compiles at a time; each object is rebuilt only when its source or a header is newer.
obj_of() { echo "$OUT/obj/$(echo "$1" | tr / _).o"; }
objs=()         # the self-test: the kernels and core sources
golden_objs=()  # the golden run: the same minus the self-test's main, plus golden_sources
for src in "${sources[@]}"; do
  objs+=("$(obj_of "$src")")
  case "$src" in tests/kernels/neon_selftest.cpp | tests/kernels/neon_attention_check.cpp | tests/kernels/neon_packed_check.cpp | tests/kernels/neon_lowbit_check.cpp | tests/kernels/neon_iqgrid_check.cpp | src/sample/*.cpp | tests/sample/*.cpp) ;; *) golden_objs+=("$(obj_of "$src")") ;; esac
done
for src in "${golden_sources[@]}"; do golden_objs+=("$(obj_of "$src")"); done
# Through ccache where it is installed (the Makefile sets CCACHE_BASEDIR, so a fresh clone in
# another folder reuses earlier objects).
compile=("$CXX")
command -v ccache >/dev/null && compile=(ccache "$CXX")
pids=()
for src in "${sources[@]}" "${golden_sources[@]}"; do
  obj=$(obj_of "$src")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find src tests/kernels -name '*.h' -newer "$obj" -print -quit)" ]; then
    "${compile[@]}" "${flags[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
"$CXX" -static -o "$OUT/neon_selftest" "${objs[@]}"
"$CXX" -static -o "$OUT/neon_golden" "${golden_objs[@]}" -lpthread
echo "test-aarch64: built $OUT/neon_selftest and $OUT/neon_golden in $(( $(date +%s) - start ))s"

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
  echo "test-aarch64: golden greedy run under $QEMU -cpu $cpu (matrices packed at load)"
  if ! "$QEMU" -cpu "$cpu" "$OUT/neon_golden" "$DATA"; then
    echo "test-aarch64: golden FAILED on -cpu $cpu" >&2
    status=1
  fi
done
# Once more unpacked (EDGELM_PACK=0: the per-call GEMM for the prompt, the vec_dot rows for decode).
echo "test-aarch64: golden greedy run under $QEMU -cpu max with EDGELM_PACK=0"
if ! EDGELM_PACK=0 "$QEMU" -cpu max "$OUT/neon_golden" "$DATA"; then
  echo "test-aarch64: unpacked golden FAILED on -cpu max" >&2
  status=1
fi
echo "test-aarch64: done in $(( $(date +%s) - start ))s"
exit $status
