#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for a bounded time from a
# seed corpus: the small real GGUFs in shared/ plus tiny synthetic models of each architecture.
# Usage: scripts/fuzz.sh [SHARED_DIR] [SECONDS_PER_TARGET]
set -euo pipefail
shared=$(realpath "${1:-../shared}")
seconds=${2:-30}
cd "$(dirname "$0")/.."

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target fuzz_gguf
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target edgelm

work=build/fuzz/corpus
rm -rf "$work" && mkdir -p "$work/gguf"
cp "$shared/vocab/ggml-vocab-bert-bge.gguf" "$work/gguf/" 2>/dev/null || true
./build/release/src/tools/edgelm synth -o "$work/gguf/llama.gguf" --dim 8 --layers 1 --ff 16 --heads 2 --kv-heads 1 --n-vocab 16 2>/dev/null
./build/release/src/tools/edgelm synth -o "$work/gguf/qwen2.gguf" --arch qwen2 --dim 8 --layers 1 --ff 16 --heads 2 --kv-heads 2 --n-vocab 16 --type f16 2>/dev/null
head -c 16384 "$shared/models/stories260K-f16.gguf" > "$work/gguf/stories-head.gguf"

echo "fuzz: fuzz_gguf for ${seconds}s"
./build/fuzz/tests/fuzz/fuzz_gguf -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/gguf" 2>&1 | tail -n 12
echo "fuzz: fuzz_gguf finished without a crash"
