// `edgelm bench`: prefill and decode throughput of a model (llama-bench style) through the
// batching engine that serve runs (paged KV of --kv-type, default f16; bench_engine.h), at
// context depths -d, with the effective weight bandwidth of each test and its fraction of the
// machine's measured read bandwidth. `--membw` only measures the bandwidth; `--concurrency`
// benchmarks the engine under N simultaneous requests instead (bench_concurrency.h); `--image
// PATH --mmproj FILE` measures image input instead: each image's decode and encode time, cold
// (the first encode) and warm (the median of the later ones, the encoder cache off), and the
// time to first token of one image plus a ~20-token question (encode + prefill).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "engine/generator.h"
#include "format/model_file.h"
#include "kernels/isa.h"
#include "kernels/prefetch.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench_concurrency.h"
#include "tools/cli_images.h"
#include "tools/bench_engine.h"
#include "tools/command.h"
#include "tools/eval_inputs.h"
#include "tools/membw.h"

namespace edgelm::tools {
namespace {

struct BenchOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string n_prompt = "128";  // -p: prefill tests, e.g. "128,512"
  std::string n_gen = "32";      // -n: decode tests
  std::string depths = "0";      // -d: context already in the KV, e.g. "0,2048"
  int threads = 0;
  std::string cpu_affinity;
  int reps = 5;
  std::string output = "md";
  bool membw_only = false;
  double membw_gbs = 0.0;   // 0: measure
  size_t membw_mib = 512;   // buffer of the bandwidth measurement
  std::string concurrency;  // "1,2,4": the engine benchmark
  EngineFlags engine;
  SpecFlags spec;
  std::string prompt_file;  // --concurrency: every request's prompt (else random tokens)
  format::LoadOptions load;
  std::vector<std::string> images;  // --image: the image input benchmark (needs --mmproj)
  std::string mmproj;
};

struct TestResult {
  std::string test;  // "pp128", "tg32", "tg32@d2048"
  int n_depth = 0;
  double median = 0, min = 0, max = 0;  // tok/s
  double gb_s = 0, bw_fraction = 0;
};

// The label of the model's weight type: general.file_type when the file has one, else the
// type holding most of the weight bytes.
std::string weight_type_label(const format::ModelFile& f) {
  static const std::pair<uint32_t, const char*> kFileTypes[] = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {32, "BF16"}};
  if (auto ft = f.metadata.get_u32("general.file_type"); ft.ok())
    for (const auto& [id, name] : kFileTypes)
      if (id == *ft) return name;
  return dominant_type(f);
}

TestResult summarize(std::string name, std::vector<double> rates, double bytes_per_token, double membw) {
  std::sort(rates.begin(), rates.end());
  TestResult r;
  r.test = std::move(name);
  r.min = rates.front();
  r.max = rates.back();
  r.median = median_of(rates);
  r.gb_s = bytes_per_token * r.median / 1e9;
  r.bw_fraction = membw > 0 ? r.gb_s / membw : 0.0;
  return r;
}

// The question of the image TTFT test: about 20 tokens of plain English.
constexpr const char* kImageQuestion =
    "What is shown in this picture? Describe the main object, its colour and where it is, in one short sentence.";

double median_ms(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  return median_of(s) * 1e3;
}

// `bench --image`: per image, decode and encode cold then warm (the encoder cache off), and the
// TTFT of the image plus kImageQuestion, each -r times.
int run_image_bench(const BenchOptions& o, ThreadPool& pool) {
  if (o.mmproj.empty())
    return report_error(make_error("--image needs --mmproj FILE (the model's vision encoder, an mmproj GGUF)"));
  std::vector<std::string> bytes;
  for (const std::string& p : o.images) {
    auto b = read_image_file(p);
    if (!b.ok()) return report_error(b.error());
    bytes.push_back(std::move(b).value());
  }
  auto lm = engine::load_model(o.model_path, o.tokenizer_path, o.load);
  if (!lm.ok()) return report_error(lm.error());
  auto in_or = open_cli_images(o.mmproj, *lm, pool.n_threads(), /*cache_entries=*/0,
                                /*max_image_tokens=*/engine::GenerateOptions{}.n_batch);
  if (!in_or.ok()) return report_error(in_or.error());
  serve::ImageInput& in = **in_or;
  const int reps = std::max(2, o.reps);  // the first is cold, the others warm
  nlohmann::json out = nlohmann::json::array();
  if (o.output != "json") {
    const std::string geometry = in.config().dynamic_resolution()
                                     ? std::string("dynamic resolution")
                                     : fmt::format("{} px, {} tokens per frame", in.config().image_size,
                                                   in.n_tokens_per_frame());
    std::printf("model: %s, mmproj: %s (%s, %s), %d threads, %d reps\n\n", o.model_path.c_str(), o.mmproj.c_str(),
                std::string(vision::projector_name(in.config().projector)).c_str(), geometry.c_str(), pool.n_threads(),
                reps);
    std::printf("| image | frames | decode ms | encode ms (cold) | encode ms (warm) | prompt tokens | prefill ms | "
                "TTFT ms |\n|---|---|---|---|---|---|---|---|\n");
  }
  for (size_t i = 0; i < o.images.size(); ++i) {
    double cold_ms = 0;
    std::vector<double> decode_s, warm_s, prefill_s, ttft_s;
    size_t frames = 0;
    int32_t n_prompt = 0;
    for (int r = 0; r < reps; ++r) {
      Stopwatch ttft;
      auto im = in.encode_bytes(bytes[i]);
      if (!im.ok()) return report_error(make_error("--image '{}': {}", o.images[i], im.error().message));
      frames = im->embd->frames.size();
      decode_s.push_back(im->decode_s);
      if (r == 0) {
        cold_ms = im->encode_s * 1e3;
      } else {
        warm_s.push_back(im->encode_s);
      }
      engine::GenerateOptions gen;
      gen.n_predict = 1;
      gen.sampling.temperature = 0;
      if (auto st = set_image_prompt(in, *lm, kImageQuestion, {*im}, gen); !st.ok()) return report_error(st.error());
      auto stats = engine::generate(*lm, "", gen, pool, [](std::string_view) { return true; });
      if (!stats.ok()) return report_error(stats.error());
      ttft_s.push_back(ttft.seconds());
      prefill_s.push_back(stats->prefill_seconds);
      n_prompt = stats->n_prompt;
    }
    const double warm_ms = median_ms(warm_s);
    if (o.output == "json") {
      out.push_back({{"model", o.model_path},
                     {"mmproj", o.mmproj},
                     {"image", o.images[i]},
                     {"frames", frames},
                     {"decode_ms", median_ms(decode_s)},
                     {"encode_ms_cold", cold_ms},
                     {"encode_ms_warm", warm_ms},
                     {"encode_ms_per_frame_warm", frames > 0 ? warm_ms / static_cast<double>(frames) : 0.0},
                     {"prompt_tokens", n_prompt},
                     {"prefill_ms", median_ms(prefill_s)},
                     {"ttft_ms", median_ms(ttft_s)},
                     {"threads", pool.n_threads()},
                     {"reps", reps}});
    } else {
      std::printf("| %s | %zu | %.2f | %.2f | %.2f | %d | %.2f | %.2f |\n", o.images[i].c_str(), frames,
                  median_ms(decode_s), cold_ms, warm_ms, n_prompt, median_ms(prefill_s), median_ms(ttft_s));
    }
  }
  if (o.output == "json") std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int run(const BenchOptions& o) {
  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  if (o.membw_only) {
    const MemBandwidth bw = measure_read_bandwidth(pool, o.membw_mib << 20);
    std::printf("memory read bandwidth: %.2f GB/s best, %.2f GB/s median (%d passes over %zu MiB, %d threads)\n",
                bw.gb_per_s, bw.median_gb_per_s, bw.passes, bw.buffer_bytes >> 20, pool.n_threads());
    return 0;
  }
  if (o.reps < 1) return report_error(make_error("--reps must be at least 1"));
  if (!o.images.empty()) return run_image_bench(o, pool);
  if (!o.mmproj.empty()) return report_error(make_error("--mmproj is for the image benchmark: add --image PATH"));
  auto n_prompts = parse_test_sizes(o.n_prompt, "-p");
  if (!n_prompts.ok()) return report_error(n_prompts.error());
  auto n_gens = parse_test_sizes(o.n_gen, "-n");
  if (!n_gens.ok()) return report_error(n_gens.error());
  auto file = format::open_model_file(o.model_path, o.tokenizer_path, o.load);
  if (!file.ok()) return report_error(file.error());
  const std::string type = weight_type_label(*file);
  std::vector<int32_t> prompt_tokens;
  if (!o.prompt_file.empty()) {
    if (o.concurrency.empty()) return report_error(make_error("--prompt-file needs --concurrency"));
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) return report_error(make_error("cannot read prompt file '{}'", o.prompt_file));
    std::ostringstream ss;
    ss << in.rdbuf();
    auto tok = tokenizer::load_tokenizer(file->metadata);
    if (!tok.ok()) return report_error(tok.error());
    prompt_tokens = (*tok)->encode(ss.str(), /*add_special=*/true, /*parse_special=*/false);
  }
  const bool speculative =
      o.spec.spec != "off" || !o.spec.draft.empty() || !o.spec.draft_model.empty() || !o.spec.draft_quant.empty();
  if (speculative && o.concurrency.empty())
    return report_error(make_error("speculative decoding (--spec, --draft-model, --draft-quant) needs --concurrency"));
  auto loaded = model::Model::load(std::move(file).value());
  if (!loaded.ok()) return report_error(loaded.error());
  const model::Model& m = **loaded;
  engine::DraftModel draft;  // outlives the engine benchmark
  if (!o.concurrency.empty()) {
    ConcurrencyBenchOptions c;
    auto levels = parse_levels(o.concurrency);
    if (!levels.ok()) return report_error(levels.error());
    auto eo = engine_options(o.engine);
    if (!eo.ok()) return report_error(eo.error());
    c.levels = *levels;
    if (n_prompts->size() != 1 || n_gens->size() != 1)
      return report_error(make_error("--concurrency takes one -p and one -n, not lists"));
    c.n_prompt = n_prompts->front();
    c.n_gen = n_gens->front();
    c.reps = o.reps;
    c.json = o.output == "json";
    c.model_path = o.model_path;
    c.type = type;
    c.engine = *eo;
    c.prompt_tokens = prompt_tokens;
    if (auto st = engine::configure_speculation(o.spec, m, o.tokenizer_path, pool, c.engine.spec, draft, o.load);
        !st.ok())
      return report_error(st.error());
    if (c.n_prompt < 1 || c.n_gen < 1) return report_error(make_error("--concurrency needs -p and -n of at least 1"));
    return run_concurrency_bench(c, m, pool);
  }
  const double membw = o.membw_gbs > 0 ? o.membw_gbs : measure_read_bandwidth(pool, o.membw_mib << 20).gb_per_s;
  const double bytes_per_token = static_cast<double>(m.weights().n_bytes_per_token);

  EngineBenchOptions eb;
  eb.n_prompts = *n_prompts;
  eb.n_gens = *n_gens;
  eb.reps = o.reps;
  auto depths = parse_depths(o.depths);
  if (!depths.ok()) return report_error(depths.error());
  eb.depths = *depths;
  auto eo = engine_options(o.engine);
  if (!eo.ok()) return report_error(eo.error());
  eb.engine = *eo;
  auto runs = run_engine_bench(eb, m, pool);
  if (!runs.ok()) return report_error(runs.error());
  std::vector<TestResult> results;
  for (auto& r : *runs) {
    results.push_back(summarize(r.test, r.rates, bytes_per_token, membw));
    results.back().n_depth = r.n_depth;
  }
  const std::string kv_type(kv::kv_type_name(eb.engine.kv_type));

  if (o.output == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
      out.push_back({{"model", o.model_path},
                     {"type", type},
                     {"threads", pool.n_threads()},
                     {"test", r.test},
                     {"tok_s", r.median},
                     {"tok_s_min", r.min},
                     {"tok_s_max", r.max},
                     {"gb_s", r.gb_s},
                     {"bw_fraction", r.bw_fraction},
                     {"membw_gb_s", membw},
                     {"reps", o.reps},
                     {"kv_type", kv_type},
                     {"isa", kernels::isa_name(kernels::active_isa())},
                     {"decode_prefetch_bytes", kernels::decode_prefetch_bytes()}});
      if (r.n_depth > 0) out.back()["n_depth"] = r.n_depth;
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    // The x86 packed tiles' single-token prefetch distance (kernels/prefetch.h), for reproducing a row.
    const kernels::Isa isa = kernels::active_isa();
    const std::string prefetch =
        isa == kernels::Isa::scalar || isa == kernels::Isa::neon
            ? std::string()
            : " (decode prefetch " + std::to_string(kernels::decode_prefetch_bytes()) + " B)";
    std::printf(
        "model: %s (%s, %.1f MiB read per token), kernels %s%s, %s KV, memory read bandwidth %.2f GB/s, %d reps\n\n",
        o.model_path.c_str(), type.c_str(), bytes_per_token / (1024.0 * 1024.0),
        std::string(kernels::isa_name(isa)).c_str(), prefetch.c_str(), kv_type.c_str(), membw, o.reps);
    std::printf("| type | threads | test | tok/s (median) | min | max | GB/s | of bandwidth |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : results) {
      std::printf("| %s | %d | %s | %.2f | %.2f | %.2f | %.2f | %.0f%% |\n", type.c_str(), pool.n_threads(),
                  r.test.c_str(), r.median, r.min, r.max, r.gb_s, r.bw_fraction * 100.0);
    }
  }
  return 0;
}

}  // namespace

CommandRunner add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode speed and achieved memory bandwidth");
  cmd->add_option("-m,--model", o->model_path, "Model file");
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("-p,--n-prompt", o->n_prompt,
                  "Prompt tokens of the prefill tests, one test per entry, e.g. 128,512 (0: none)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Tokens of the decode tests, one test per entry, e.g. 32,128 (0: none)")
      ->capture_default_str();
  cmd->add_option("-d,--n-depth", o->depths,
                  "Context depths: run the tests after this many tokens already in the KV, e.g. 0,2048 "
                  "(the context is sized to depth + p + n, past the model's trained length if need be)")
      ->capture_default_str();
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  cmd->add_option("-r,--reps", o->reps, "Repetitions per test")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("-o,--output", o->output, "Output format")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  cmd->add_flag("--membw", o->membw_only, "Only measure the memory read bandwidth");
  cmd->add_option("--membw-gbs", o->membw_gbs, "Use this read bandwidth (GB/s) instead of measuring it");
  cmd->add_option("--membw-mib", o->membw_mib, "Buffer size of the bandwidth measurement (MiB)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--concurrency", o->concurrency,
                  "Benchmark the batching engine at these concurrency levels instead, e.g. 1,2,4,8");
  add_engine_options(cmd, o->engine);
  add_spec_options(cmd, o->spec);
  add_model_load_options(cmd, o->load);
  cmd->add_option("--prompt-file", o->prompt_file,
                  "--concurrency: every request's prompt is this file's text (default: -p random tokens)");
  cmd->add_option("--image", o->images,
                  "Benchmark image input instead: encode time (cold, warm) and TTFT of this image plus a ~20-token "
                  "question; repeatable; needs --mmproj")
      ->allow_extra_args(false);
  cmd->add_option("--mmproj", o->mmproj, "Vision encoder of the model (mmproj GGUF), for --image");
  cmd->callback([cmd, o] {
    if (!o->membw_only && o->model_path.empty()) throw CLI::RequiredError("--model");
  });
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
