#include "vision/vit_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "vision/vit_math.h"

namespace edgelm::vision {

size_t attention_scratch_bytes(int64_t n_tok, int64_t head_dim) {
  return static_cast<size_t>(kQueryBlock * (n_tok + head_dim)) * sizeof(float);
}

namespace {

// Item `item` of a loop over segments that have items(n_tok) items each: its segment, and its
// index within the segment's items.
template <typename ItemsOf>
std::pair<size_t, int64_t> locate_item(std::span<const AttentionSegment> segments, size_t item, ItemsOf items) {
  auto local = static_cast<int64_t>(item);
  size_t si = 0;
  for (;; ++si) {
    const int64_t n = items(segments[si].n_tok);
    if (local < n) break;
    local -= n;
  }
  return {si, local};
}

}  // namespace

void transpose_values(std::span<const AttentionSegment> segments, const float* v, const float* bias, float* vt,
                      int64_t n_head, int64_t head_dim, ThreadPool& pool) {
  constexpr int64_t kBlock = 16;
  const int64_t E = n_head * head_dim;
  const auto items = [&](int64_t n_tok) { return n_head * ((n_tok + kBlock - 1) / kBlock); };
  size_t n_items = 0;
  for (const AttentionSegment& sg : segments) n_items += static_cast<size_t>(items(sg.n_tok));
  pool.parallel_for(n_items, [&](size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) {
      const auto [si, local] = locate_item(segments, item, items);
      const AttentionSegment& sg = segments[si];
      const int64_t n_blocks = (sg.n_tok + kBlock - 1) / kBlock;
      const int64_t h = local / n_blocks, t0 = local % n_blocks * kBlock;
      const int64_t nt = std::min(kBlock, sg.n_tok - t0);
      const float* src = v + (sg.row0 + t0) * E + h * head_dim;
      float* dst = vt + sg.row0 * E + h * head_dim * sg.n_tok + t0;
      for (int64_t d = 0; d < head_dim; ++d) {
        float* row = dst + d * sg.n_tok;
        if (bias != nullptr) {
          const float b = bias[h * head_dim + d];
          for (int64_t i = 0; i < nt; ++i) row[i] = src[i * E + d] + b;
        } else {
          for (int64_t i = 0; i < nt; ++i) row[i] = src[i * E + d];
        }
      }
    }
  });
}

void vit_attention(const float* qh, const float* k, const float* vt, float* out, int64_t n_tok, int64_t n_head,
                   int64_t head_dim, ThreadPool& pool, std::vector<AttentionThreadScratch>& scratch,
                   float scale_arg) {
  const AttentionSegment one{0, n_tok};
  vit_attention_batch(std::span(&one, 1), qh, k, vt, out, n_head, head_dim, pool, scratch, scale_arg);
}

void vit_attention_batch(std::span<const AttentionSegment> segments, const float* qh, const float* k, const float* vt,
                         float* out, int64_t n_head, int64_t head_dim, ThreadPool& pool,
                         std::vector<AttentionThreadScratch>& scratch, float scale_arg) {
  const int64_t E = n_head * head_dim;
  int64_t max_tok = 0, n_items = 0;
  for (const AttentionSegment& sg : segments) {
    max_tok = std::max(max_tok, sg.n_tok);
    n_items += n_head * ((sg.n_tok + kQueryBlock - 1) / kQueryBlock);
  }
  const size_t n_threads = static_cast<size_t>(pool.n_threads());
  if (scratch.size() < n_threads) scratch.resize(n_threads);
  for (AttentionThreadScratch& s : scratch) {
    if (!s.serial) s.serial = std::make_unique<ThreadPool>(1);
    // matmul indexes its tile scratch by the outer pool's thread index (ThreadPool::thread_index).
    if (s.mm.tile.size() < n_threads) s.mm.tile.resize(n_threads);
    const auto n_scores = static_cast<size_t>(kQueryBlock * max_tok), n_out = static_cast<size_t>(kQueryBlock * head_dim);
    if (s.scores.size() < n_scores) s.scores.resize(n_scores);
    if (s.out.size() < n_out) s.out.resize(n_out);
  }
  const float scale = scale_arg > 0.0f ? scale_arg : 1.0f / std::sqrt(static_cast<float>(head_dim));
  // Item (image si, head h, queries q0 ..) with a thread's scratch.
  auto run_item = [&](AttentionThreadScratch& s, size_t si, int64_t h, int64_t q0) {
    const int64_t n_tok = segments[si].n_tok, base = segments[si].row0 * E;
    const int64_t nq = std::min(kQueryBlock, n_tok - q0);
    // K_h: [n_tok, head_dim] with row stride E (a column range of k).
    kernels::WeightMatrix kh{DType::f32, n_tok, head_dim, reinterpret_cast<const uint8_t*>(k + base + h * head_dim),
                             static_cast<size_t>(E) * sizeof(float)};
    kh.relaxed = true;
    kernels::matmul(kh, qh + base + (h * n_tok + q0) * head_dim, nq, s.scores.data(), *s.serial, s.mm);  // [nq, n_tok]
    for (int64_t i = 0; i < nq; ++i) softmax_scaled(s.scores.data() + i * n_tok, n_tok, scale);
    // V_h^T: [head_dim, n_tok].
    kernels::WeightMatrix vh{DType::f32, head_dim, n_tok,
                             reinterpret_cast<const uint8_t*>(vt + base + h * head_dim * n_tok),
                             static_cast<size_t>(n_tok) * sizeof(float)};
    vh.relaxed = true;
    kernels::matmul(vh, s.scores.data(), nq, s.out.data(), *s.serial, s.mm);  // [nq, head_dim]
    for (int64_t i = 0; i < nq; ++i)
      std::memcpy(out + base + (q0 + i) * E + h * head_dim, s.out.data() + i * head_dim,
                  static_cast<size_t>(head_dim) * sizeof(float));
  };
  // Which thread claims which items varies, so a thread's kernel buffers would grow whenever it
  // first met a larger item: each scratch first runs the largest item here, on the calling
  // thread (the same values the loop writes again), so the loop itself never allocates.
  size_t largest = 0;
  for (size_t si = 0; si < segments.size(); ++si)
    if (segments[si].n_tok > segments[largest].n_tok) largest = si;
  for (AttentionThreadScratch& s : scratch)
    if (!segments.empty() && s.warm_tok < max_tok) {
      run_item(s, largest, 0, 0);
      s.warm_tok = max_tok;
    }
  pool.parallel_for(static_cast<size_t>(n_items), [&](size_t begin, size_t end) {
    AttentionThreadScratch& s = scratch[static_cast<size_t>(ThreadPool::thread_index())];
    for (size_t item = begin; item < end; ++item) {
      const auto [si, local] = locate_item(segments, item, [&](int64_t n_tok) {
        return n_head * ((n_tok + kQueryBlock - 1) / kQueryBlock);
      });
      const int64_t n_blocks = (segments[si].n_tok + kQueryBlock - 1) / kQueryBlock;
      run_item(s, si, local / n_blocks, local % n_blocks * kQueryBlock);
    }
  });
}

}  // namespace edgelm::vision
