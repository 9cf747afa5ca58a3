// Encode time of one image through a vision encoder (mmproj): a file, or a synthetic shape
// made in memory (vision/synthetic_mmproj.h). Prints the load time, the scratch the encoder
// holds, and each repetition's encode time (the first one grows the scratch; the others are warm).
//
//   bench_vision_encode --shape gemma3 --type f16 --threads 2 --reps 3
//   bench_vision_encode --mmproj mmproj.gguf --threads 4
//   bench_vision_encode --shape gemma3 --layers 2   (a shorter synthetic tower)
//   bench_vision_encode --mmproj f.gguf --image chw.f32 --out tokens.f32   (raw float32 in and out,
//     to compare with another engine's encoder on the same tensor)
//   bench_vision_encode --shape smolvlm-256m --batch 4   (also: 4 different images one at a time,
//     then as one encode_batch, images per second of each; --batch-patches caps a batch group)
//   bench_vision_encode --shape gemma4-e2b --size 384 --batch 4   (a dynamic-resolution encoder at S x S px)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

using namespace edgelm;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int fail(const std::string& message) {
  std::fprintf(stderr, "bench_vision_encode: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, shape = "gemma3", type = "f16", image_path, out_path;
  int threads = ThreadPool::hardware_threads(), reps = 3, layers = 0, batch = 0;
  int64_t batch_patches = vision::VisionEncoder::kBatchPatches;
  int size = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mmproj")
      path = argv[i + 1];
    else if (a == "--shape")
      shape = argv[i + 1];
    else if (a == "--type")
      type = argv[i + 1];
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--image")
      image_path = argv[i + 1];
    else if (a == "--out")
      out_path = argv[i + 1];
    else if (a == "--layers")
      layers = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--batch")
      batch = std::atoi(argv[i + 1]);
    else if (a == "--size")
      size = std::atoi(argv[i + 1]);
    else if (a == "--batch-patches")
      batch_patches = std::atoll(argv[i + 1]);
    else
      return fail("unknown option " + a);
  }
  const auto t_load = std::chrono::steady_clock::now();
  Result<std::unique_ptr<vision::VisionEncoder>> enc = make_error("no encoder");
  if (!path.empty()) {
    enc = vision::VisionEncoder::open(path);
  } else {
    vision::SyntheticMmprojSpec spec;
    if (auto st = vision::apply_mmproj_shape(spec, shape); !st.ok()) return fail(st.error().message);
    const auto t = dtype_from_name(type);
    if (!t) return fail("unknown type " + type);
    spec.weight_type = *t;
    if (layers > 0) spec.n_layer = layers;  // a shorter tower (per-layer cost, profiling)
    auto file = vision::make_synthetic_mmproj(spec);
    if (!file.ok()) return fail(file.error().message);
    enc = vision::VisionEncoder::load(std::move(*file));
  }
  if (!enc.ok()) return fail(enc.error().message);
  const double load_ms = ms_since(t_load);
  const vision::VisionEncoder& e = **enc;
  const vision::VisionConfig& c = e.config();
  std::printf("encoder: %s, %d px, patch %d, %d patches, %d layers, width %d, ffn %d, %d heads -> %d tokens x %d\n",
              std::string(vision::projector_name(c.projector)).c_str(), c.image_size, c.patch_size, c.n_patches(),
              c.n_layer, c.n_embd, c.n_ff, c.n_head, e.n_output_tokens(), e.n_embd_out());
  std::printf("weights: %s %.1f MB in the file; load %.0f ms; scratch %.1f MB with %d threads\n",
              std::string(dtype_name(e.weights().layers[0].wq.type)).c_str(), e.weights().n_bytes_file / 1e6, load_ms,
              static_cast<double>(e.scratch_bytes(threads)) / 1e6, threads);

  const int32_t S = size > 0 ? size : c.image_size;  // the image's side
  if (auto st = e.check_size(S, S); !st.ok()) return fail(st.error().message);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> img(static_cast<size_t>(3) * S * S);
  for (float& v : img) v = dist(rng);
  if (!image_path.empty()) {  // raw float32 [3, S, S], e.g. what a reference harness fed its encoder
    FILE* f = std::fopen(image_path.c_str(), "rb");
    if (f == nullptr || std::fread(img.data(), sizeof(float), img.size(), f) != img.size())
      return fail("cannot read " + std::to_string(img.size()) + " floats from " + image_path);
    std::fclose(f);
  }
  std::vector<float> out(static_cast<size_t>(e.n_output_tokens(S, S)) * static_cast<size_t>(e.n_embd_out()));
  ThreadPool pool(threads);
  vision::VisionScratch scratch;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (auto st = e.encode(img.data(), S, S, out, pool, scratch); !st.ok()) return fail(st.error().message);
    times.push_back(ms_since(t0));
    std::printf("encode %d: %.0f ms%s\n", r, times.back(), r == 0 ? " (cold scratch)" : "");
  }
  if (!out_path.empty()) {  // the soft tokens as raw float32 [n_tokens, n_embd_out]
    FILE* f = std::fopen(out_path.c_str(), "wb");
    if (f == nullptr || std::fwrite(out.data(), sizeof(float), out.size(), f) != out.size())
      return fail("cannot write " + out_path);
    std::fclose(f);
  }
  std::sort(times.begin(), times.end());
  std::printf("encode median: %.0f ms (%d reps, %d threads); scratch held %.1f MB\n", times[times.size() / 2], reps,
              threads, static_cast<double>(scratch.held_bytes()) / 1e6);
  if (batch < 2) return 0;

  // `batch` different images: one at a time (the scratch above, warm), then as one batch (a
  // scratch of its own), alternating, reps times each; outputs compared.
  std::vector<std::vector<float>> imgs(static_cast<size_t>(batch)), single(imgs.size()), batched(imgs.size());
  std::vector<vision::VisionImage> images;
  for (size_t i = 0; i < imgs.size(); ++i) {
    imgs[i].resize(img.size());
    for (float& v : imgs[i]) v = dist(rng);
    single[i].resize(out.size());
    batched[i].resize(out.size());
  }
  for (size_t i = 0; i < imgs.size(); ++i)
    images.push_back({imgs[i].data(), S, S, batched[i]});
  vision::VisionScratch batch_scratch;
  std::vector<double> t_single, t_batch;
  for (int r = 0; r <= reps; ++r) {  // r 0: warms the batch scratch, not counted
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < imgs.size(); ++i)
      if (auto st = e.encode(imgs[i].data(), S, S, single[i], pool, scratch); !st.ok()) return fail(st.error().message);
    const double ms_single = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    if (auto st = e.encode_batch(images, pool, batch_scratch, batch_patches); !st.ok()) return fail(st.error().message);
    const double ms_batch = ms_since(t0);
    std::printf("%d images: one at a time %.0f ms, one batch %.0f ms%s\n", batch, ms_single, ms_batch,
                r == 0 ? " (cold batch scratch)" : "");
    if (r == 0) continue;
    t_single.push_back(ms_single);
    t_batch.push_back(ms_batch);
  }
  bool same = true;
  for (size_t i = 0; i < imgs.size(); ++i) same = same && single[i] == batched[i];
  std::sort(t_single.begin(), t_single.end());
  std::sort(t_batch.begin(), t_batch.end());
  const double ms1 = t_single[t_single.size() / 2], msb = t_batch[t_batch.size() / 2];
  std::printf("images/s: %.2f one at a time, %.2f batched (x%.2f; %d images, groups of <= %lld patches); outputs %s; "
              "batch scratch held %.1f MB\n",
              1e3 * batch / ms1, 1e3 * batch / msb, ms1 / msb, batch, static_cast<long long>(batch_patches),
              same ? "bit-identical" : "DIFFER", static_cast<double>(batch_scratch.held_bytes()) / 1e6);
  return same ? 0 : 1;
}
