// VisionEncoder::encode_batch: several images (same or different grids) in one pass give each
// image exactly (bit for bit) what its encode alone gives (an image of one output token, whose
// projector matmul alone is a single row on the kernels' vec_dot path: within 1e-5 of its scale,
// float reassociation), for every projector, F32 and F16
// weights, groups cut by the patch budget, batches whose stacked rows cross a matmul row chunk
// inside an image; a refused image is named by its index and nothing is encoded; a warm batch
// allocates nothing (counting operator new) and the scratch stays within scratch_bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/counting_new.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm::vision {
namespace {

struct Size {
  int32_t w, h;
};

std::vector<float> random_chw(const Size& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> img(static_cast<size_t>(3 * s.w * s.h));
  for (float& v : img) v = dist(rng);
  return img;
}

std::unique_ptr<VisionEncoder> load(const SyntheticMmprojSpec& spec) {
  auto file = make_synthetic_mmproj(spec);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto enc = VisionEncoder::load(std::move(*file));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  return enc.ok() ? std::move(*enc) : nullptr;
}

SyntheticMmprojSpec shape(const std::string& name, DType type = DType::f32) {
  SyntheticMmprojSpec s;
  EXPECT_TRUE(apply_mmproj_shape(s, name).ok());
  s.weight_type = type;
  return s;
}

// Encodes `sizes` one at a time and as one batch (budget max_patches, `threads` threads) and
// expects identical outputs.
void expect_batch_equals_singles(const VisionEncoder& e, const std::vector<Size>& sizes, int64_t max_patches,
                                 int threads = 2) {
  std::vector<std::vector<float>> in, single, batched;
  for (size_t i = 0; i < sizes.size(); ++i) {
    in.push_back(random_chw(sizes[i], 100 + i));
    const size_t n_out = static_cast<size_t>(e.n_output_tokens(sizes[i].w, sizes[i].h)) * e.n_embd_out();
    single.emplace_back(n_out);
    batched.emplace_back(n_out, -1.0f);
  }
  ThreadPool pool(threads);
  VisionScratch one;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Status st = e.encode(in[i].data(), sizes[i].w, sizes[i].h, single[i], pool, one);
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  std::vector<VisionImage> images;
  for (size_t i = 0; i < sizes.size(); ++i) images.push_back({in[i].data(), sizes[i].w, sizes[i].h, batched[i]});
  VisionScratch batch;
  const Status st = e.encode_batch(images, pool, batch, max_patches);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t i = 0; i < sizes.size(); ++i) {
    double scale = 0, err = 0;
    for (size_t j = 0; j < single[i].size(); ++j) {
      scale = std::max(scale, static_cast<double>(std::fabs(single[i][j])));
      err = std::max(err, static_cast<double>(std::fabs(single[i][j] - batched[i][j])));
    }
    EXPECT_GT(scale, 0.01) << "degenerate output of image " << i;
    if (e.n_output_tokens(sizes[i].w, sizes[i].h) == 1)  // alone, its projector matmul is one row: vec_dot
      EXPECT_LE(err, 1e-5 * scale) << "image " << i << " (" << sizes[i].w << " x " << sizes[i].h << ")";
    else
      EXPECT_EQ(batched[i], single[i]) << "image " << i << " (" << sizes[i].w << " x " << sizes[i].h << ")";
  }
}

TEST(VisionBatch, Gemma3ImagesEqualTheirSingleEncodes) {
  SyntheticMmprojSpec spec = shape("tiny");
  const Size s{spec.image_size, spec.image_size};
  auto e = load(spec);
  ASSERT_TRUE(e);
  expect_batch_equals_singles(*e, {s, s, s}, VisionEncoder::kBatchPatches);
  spec.weight_type = DType::f16;
  auto f16 = load(spec);
  ASSERT_TRUE(f16);
  expect_batch_equals_singles(*f16, {s, s, s, s}, VisionEncoder::kBatchPatches, 3);
}

TEST(VisionBatch, Idefics3TilesAcrossMatmulChunksEqualSingles) {
  // 20 x 20 = 400 patches a tile: 3 tiles stack to 1200 rows, so the first matmul chunk (1024
  // rows) ends inside the third tile.
  SyntheticMmprojSpec spec = shape("tiny-idefics3", DType::f16);
  spec.image_size = 8 * 20;
  spec.preproc_image_size = 0;
  spec.n_merge = 2;
  auto e = load(spec);
  ASSERT_TRUE(e);
  const Size s{spec.image_size, spec.image_size};
  expect_batch_equals_singles(*e, {s, s, s}, 4096);  // a budget past the default, which is one chunk
}

TEST(VisionBatch, Qwen3vlDifferentGridsEqualSingles) {
  auto e = load(shape("tiny-qwen3vl"));
  ASSERT_TRUE(e);
  // Resampled positions, non-square, and one over a query block (16 x 24 = 384 patches).
  expect_batch_equals_singles(*e, {{64, 64}, {32, 48}, {64, 96}, {8, 8}}, VisionEncoder::kBatchPatches);
}

TEST(VisionBatch, Gemma4vDifferentGridsEqualSingles) {
  auto e = load(shape("tiny-gemma4v", DType::f16));
  ASSERT_TRUE(e);
  expect_batch_equals_singles(*e, {{48, 36}, {24, 48}, {48, 48}}, VisionEncoder::kBatchPatches);
}

TEST(VisionBatch, PatchBudgetCutsGroups) {
  auto e = load(shape("tiny-qwen3vl"));
  ASSERT_TRUE(e);
  // 256 + 96 + 384 + 4 patches with a budget of 300: groups {0}, {1}, {2} (over the budget alone), {3};
  // with 400: {0, 1}, {2, 3}.
  expect_batch_equals_singles(*e, {{64, 64}, {32, 48}, {64, 96}, {8, 8}}, 300);
  expect_batch_equals_singles(*e, {{64, 64}, {32, 48}, {64, 96}, {8, 8}}, 400, 1);
}

TEST(VisionBatch, RefusedImageIsNamedAndNothingIsEncoded) {
  auto e = load(shape("tiny-qwen3vl"));
  ASSERT_TRUE(e);
  const auto a = random_chw({32, 32}, 1);
  auto b = random_chw({32, 32}, 2);
  b[5] = std::nanf("");
  std::vector<float> oa(static_cast<size_t>(e->n_output_tokens(32, 32)) * e->n_embd_out(), 7.0f), ob = oa;
  const VisionImage images[] = {{a.data(), 32, 32, oa}, {b.data(), 32, 32, ob}};
  ThreadPool pool(2);
  VisionScratch s;
  const Status st = e->encode_batch(images, pool, s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("image 1 of the batch"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("not finite"), std::string::npos) << st.error().message;
  EXPECT_EQ(oa, std::vector<float>(oa.size(), 7.0f));
  const VisionImage wrong[] = {{a.data(), 32, 32, oa}, {a.data(), 30, 32, oa}};
  const Status st2 = e->encode_batch(wrong, pool, s);
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.error().message.find("image 1 of the batch"), std::string::npos) << st2.error().message;
}

TEST(VisionBatch, WarmBatchAllocatesNothingAndStaysInItsBound) {
  SyntheticMmprojSpec spec = shape("tiny-idefics3", DType::f16);
  auto e = load(spec);
  ASSERT_TRUE(e);
  const int32_t S = spec.image_size;
  std::vector<std::vector<float>> in, out;
  std::vector<VisionImage> images;
  for (int i = 0; i < 5; ++i) {
    in.push_back(random_chw({S, S}, 50 + static_cast<uint64_t>(i)));
    out.emplace_back(static_cast<size_t>(e->n_output_tokens()) * e->n_embd_out());
  }
  for (int i = 0; i < 5; ++i) images.push_back({in[i].data(), S, S, out[i]});
  ThreadPool pool(2);
  VisionScratch s;
  ASSERT_TRUE(e->encode_batch(images, pool, s).ok());
  const size_t held = s.held_bytes();
  const int64_t before = test::heap_allocations();
  ASSERT_TRUE(e->encode_batch(images, pool, s).ok());
  ASSERT_TRUE(e->encode_batch(std::span(images).first(2), pool, s).ok());
  EXPECT_EQ(test::heap_allocations() - before, 0);
  EXPECT_EQ(s.held_bytes(), held);
  const int64_t P = e->n_patches(S, S);
  const size_t own = (s.x.capacity() + s.h.capacity() + s.big.capacity() + s.pooled.capacity() + s.rope.capacity() +
                      s.staged.capacity()) * sizeof(float);
  EXPECT_LE(own, e->scratch_bytes(2, 5 * P, P));
  EXPECT_GT(e->scratch_bytes(2, 5 * P, P), e->scratch_bytes(2));  // it grows with the group
}

}  // namespace
}  // namespace edgelm::vision
