// Bidirectional (non-causal) multi-head self-attention over all patches of one image, the
// ViT's attention: out[t, h] = sum_p softmax_p(q_t,h . k_p,h / sqrt(head_dim)) v_p,h; for a
// batch of images (VisionEncoder::encode_batch), each image's patches attend to their own image only.
//
// Job: the ViT's heaviest part after the matmuls (Gemma 3: 4096 x 4096 scores per head and
// layer). The work is split into (head, block of kQueryBlock queries) items that the pool's
// threads claim (in a batch, the items of every image in one parallel loop); each item runs two GEMMs on the kernels' F32 path with the thread's own
// scratch (scores = K_h Q_blk^T, then softmax, then P V_h), so the scores of one block stay
// the only large buffer per thread: kQueryBlock x n_tok floats (Gemma 3: 4 MB). Larger blocks
// repack each head's K and V fewer times (once per block) for the kernels' tiles. Both GEMMs
// accept relaxed precision (WeightMatrix::relaxed: products within 2^-15 of FP32, amx's BF16
// hi/lo tiles), as PyTorch's "high" float32 matmul precision does for attention.
//
// Invariants: results depend only on the inputs (never on which thread runs an item); a warm
// call (scratch already through a call with as many tokens per image, whichever thread ran which
// items) allocates nothing; matmuls inside an item run on a one-thread pool, so the outer pool's
// parallel_for is the only one in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace edgelm::vision {

constexpr int64_t kQueryBlock = 256;

// One pool thread's buffers.
struct AttentionThreadScratch {
  std::unique_ptr<ThreadPool> serial;  // a pool of one thread: matmuls inside a work item
  kernels::MatmulScratch mm;
  std::vector<float> scores;  // [kQueryBlock, n_tok]
  std::vector<float> out;     // [kQueryBlock, head_dim]
  int64_t warm_tok = 0;       // mm has been through an item of this many tokens (the largest so far)
};

// Bytes of scratch per pool thread for n_tok tokens of head_dim (scores and one output block).
size_t attention_scratch_bytes(int64_t n_tok, int64_t head_dim);

// qh: [n_head, n_tok, head_dim] (queries per head, contiguous); k: [n_tok, n_head * head_dim]
// (row t holds every head's key); vt: [n_head, head_dim, n_tok] (values transposed per head);
// out: [n_tok, n_head * head_dim]. scratch: grown to pool.n_threads() entries. scale: the score
// scale (0: 1 / sqrt(head_dim); gemma4v: 1).
void vit_attention(const float* qh, const float* k, const float* vt, float* out, int64_t n_tok, int64_t n_head,
                   int64_t head_dim, ThreadPool& pool, std::vector<AttentionThreadScratch>& scratch,
                   float scale = 0.0f);

// One image of a batch: its n_tok tokens are rows row0 .. row0 + n_tok of the stacked batch.
struct AttentionSegment {
  int64_t row0 = 0;
  int64_t n_tok = 0;
};
// The same for a batch of images, each laid out as above in its own range of the stacked
// buffers: image i's queries [n_head, n_tok_i, head_dim] at qh + row0_i * E, its values
// [n_head, head_dim, n_tok_i] at vt + row0_i * E, its keys rows row0_i .. of k and its output
// rows of out (E = n_head * head_dim). Each image's results equal vit_attention's on it alone.
void vit_attention_batch(std::span<const AttentionSegment> segments, const float* qh, const float* k, const float* vt,
                         float* out, int64_t n_head, int64_t head_dim, ThreadPool& pool,
                         std::vector<AttentionThreadScratch>& scratch, float scale = 0.0f);

// The values of a batch into the layout above: image i's rows row0_i .. of v [n, E] (plus
// bias[j] per column j when bias is not null) -> [n_head, head_dim, n_tok_i] at vt + row0_i * E.
// In blocks of 16 tokens per (image, head) over the pool, so that every write fills whole cache
// lines (one token at a time, each of its E values went to another line, 4 KB apart).
void transpose_values(std::span<const AttentionSegment> segments, const float* v, const float* bias, float* vt,
                      int64_t n_head, int64_t head_dim, ThreadPool& pool);

}  // namespace edgelm::vision
