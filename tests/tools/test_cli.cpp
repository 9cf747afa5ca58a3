// The edgelm binary end to end: the golden commands of the README, convert, synth (qwen2),
// info, --help, and every bad input a user can hand it (one line on stderr, exit code 1,
// never a crash or a hang).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::test {
namespace {

ProcessResult edgelm(std::vector<std::string> args) {
  args.insert(args.begin(), EDGELM_BIN);
  return run_process(args);
}

std::string model(const char* name) { return shared_path(std::string("models/") + name); }

std::string golden_text(size_t i) {
  std::ifstream in(shared_path("golden/greedy.json"));
  return nlohmann::json::parse(in).at("cases").at(i).at("text");
}

std::string trim_newlines(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A failed command: exit code 1, no output, exactly one "edgelm: error:" line containing `needle`.
void expect_clean_error(const ProcessResult& r, const std::string& needle) {
  EXPECT_FALSE(r.signaled) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("edgelm: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
}

TEST(Cli, RunPrintsTheGoldenContinuation) {
  auto r = edgelm({"run", "-m", model("stories260K.bin"), "--tokenizer", model("tok512.bin"), "-p", "Once upon a time",
                   "-n", "200", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trim_newlines(r.out), golden_text(0));
  for (const char* stat : {"load time:", "prompt tokens: 5", "prefill:", "decode:", "tok/s", "peak RSS:"})
    EXPECT_NE(r.err.find(stat), std::string::npos) << stat << " missing from: " << r.err;
}

// --no-mmap (the model read into memory, not mapped) on run and bench: the same golden text.
TEST(Cli, NoMmapRunsGiveTheGolden) {
  auto r = edgelm({"run", "-m", model("stories260K.bin"), "--tokenizer", model("tok512.bin"), "-p", "Once upon a time",
                   "-n", "200", "--temp", "0", "-q", "--no-mmap"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trim_newlines(r.out), golden_text(0));
  auto g = edgelm({"run", "-m", model("stories260K-f16.gguf"), "-p", "Tom and his dog", "-n", "120", "--temp", "0",
                   "-q", "--no-mmap"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(trim_newlines(g.out), golden_text(1));
  auto b = edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-p", "4", "-n", "2", "-r", "1", "-t", "1", "-o",
                   "json", "--membw-gbs", "10", "--no-mmap"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(b.out).size(), 2u);
  expect_clean_error(edgelm({"run", "-m", "/nonexistent/m.gguf", "-p", "x", "--no-mmap"}), "/nonexistent/m.gguf");
}

TEST(Cli, ConvertThenRunGivesTheGolden) {
  TempDir dir;
  const std::string out = dir.file("stories.gguf");
  auto c = edgelm({"convert", model("stories260K.bin"), "--tokenizer", model("tok512.bin"), "-o", out});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto r = edgelm({"run", "-m", out, "-p", "Tom and his dog", "-n", "120", "--temp", "0", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trim_newlines(r.out), golden_text(1));
  EXPECT_EQ(r.err, "");
}

TEST(Cli, NPredictIsExact) {
  for (const char* n : {"0", "1", "7", "33"}) {
    auto r = edgelm({"run", "-m", model("stories260K-f32.gguf"), "-p", "Once", "-n", n, "--ignore-eos", "--seed", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(std::string("generated: ") + n + " "), std::string::npos) << r.err;
  }
}

TEST(Cli, SeededSamplingIsReproducible) {
  auto run = [](const char* seed) {
    return edgelm({"run", "-m", model("stories260K-f16.gguf"), "-p", "Once upon a time", "-n", "40", "--temp", "1.0",
                   "--seed", seed, "-q"})
        .out;
  };
  EXPECT_EQ(run("42"), run("42"));
  EXPECT_NE(run("42"), run("43"));
}

TEST(Cli, SecondModelRuns) {
  auto r = edgelm({"run", "-m", model("aidreams260K.bin"), "--tokenizer", model("aidreams-tok512.bin"), "-p", "The",
                   "-n", "20", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.out.size(), 10u);
}

TEST(Cli, SyntheticQwen2Runs) {
  TempDir dir;
  const std::string out = dir.file("qwen2.gguf");
  auto s = edgelm({"synth", "-o", out, "--arch", "qwen2", "--dim", "64", "--layers", "2", "--heads", "4", "--kv-heads",
                   "2", "--ff", "96", "--vocab-from", model("stories260K-f32.gguf")});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto r = edgelm({"run", "-m", out, "-p", "Hello", "-n", "16", "--temp", "0", "--ignore-eos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generated: 16 "), std::string::npos) << r.err;
  auto i = edgelm({"info", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("blk.0.attn_q.bias"), std::string::npos);
  EXPECT_NE(i.out.find("arch qwen2"), std::string::npos);
}

// A Gemma 4 assistant beside its target: `synth --shape gemma4-tiny-assistant`, detected by
// `--draft-model`; the output is plain greedy's; an assistant for another target is refused.
TEST(Cli, Gemma4AssistantDraftsThroughDraftModel) {
  TempDir dir;
  const std::string target = dir.file("t.gguf"), assistant = dir.file("a.gguf"), wrong = dir.file("w.gguf");
  auto s = edgelm({"synth", "-o", target, "--shape", "gemma4-tiny", "--vocab", model("stories260K-f32.gguf"),
                   "--n-vocab", "512"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  s = edgelm({"synth", "-o", assistant, "--shape", "gemma4-tiny-assistant", "--vocab", target});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find("gemma4_mtp"), std::string::npos) << s.err;
  const std::vector<std::string> gen = {"-p", "Once upon a time", "-n", "24", "--temp", "0", "--ignore-eos"};
  std::vector<std::string> plain = {"run", "-m", target};
  plain.insert(plain.end(), gen.begin(), gen.end());
  std::vector<std::string> spec = plain;
  spec.insert(spec.end(), {"--draft-model", assistant, "--draft-min", "1"});
  auto p = edgelm(plain), d = edgelm(spec);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, p.out);
  EXPECT_NE(d.err.find("speculative (Gemma 4 assistant)"), std::string::npos) << d.err;
  s = edgelm({"synth", "-o", wrong, "--shape", "gemma4-tiny-assistant", "--n-vocab", "300"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  std::vector<std::string> bad = plain;
  bad.insert(bad.end(), {"--draft-model", wrong});
  expect_clean_error(edgelm(bad), "vocabulary has 300 tokens");
}

TEST(Cli, SynthNamedShapeWithLlama2cVocab) {
  TempDir dir;
  const std::string out = dir.file("s.gguf");
  auto s = edgelm({"synth", "-o", out, "--shape", "stories260k", "--vocab", model("tok512.bin"), "--type", "f16"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto i = edgelm({"info", out});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("n_embd 64, n_layer 5, n_head 8, n_head_kv 4"), std::string::npos) << i.out;
  auto r = edgelm({"run", "-m", out, "-p", "Hi", "-n", "4", "--ignore-eos"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_clean_error(edgelm({"synth", "-o", out, "--shape", "gpt-17"}), "unknown shape 'gpt-17'");
}

// qwen3 with an explicit head size and YaRN, and llama with the llama3 rope_freqs: written by
// synth, described by info, run end to end (with the embedded vocabulary's size), quantized.
TEST(Cli, SynthQwen3AndScaledLlama) {
  TempDir dir;
  const std::string q3 = dir.file("q3.gguf"), l3 = dir.file("l3.gguf"), q4 = dir.file("l3-q4.gguf");
  auto s = edgelm({"synth",
                   "-o",
                   q3,
                   "--arch",
                   "qwen3",
                   "--dim",
                   "64",
                   "--heads",
                   "4",
                   "--kv-heads",
                   "2",
                   "--head-dim",
                   "32",
                   "--rope-scaling",
                   "yarn",
                   "--rope-factor",
                   "4",
                   "--rope-orig-ctx",
                   "64",
                   "--vocab-from",
                   model("stories260K-f32.gguf")});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  auto i = edgelm({"info", q3});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("arch qwen3, n_embd 64, n_layer 2, n_head 4, n_head_kv 2, head_dim 32"), std::string::npos)
      << i.out;
  EXPECT_NE(i.out.find("rope scaling: yarn, factor 4, original ctx 64"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("blk.1.attn_k_norm.weight"), std::string::npos) << i.out;
  auto r = edgelm({"run", "-m", q3, "-p", "Hello", "-n", "8", "--temp", "0", "--ignore-eos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generated: 8 "), std::string::npos) << r.err;

  s = edgelm({"synth", "-o", l3, "--dim", "64", "--ff", "96", "--llama3-rope", "8", "--tied", "--vocab-from",
              model("stories260K-f32.gguf")});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  i = edgelm({"info", l3});
  EXPECT_NE(i.out.find("rope_freqs.weight: per-dimension frequency factors"), std::string::npos) << i.out;
  auto q = edgelm({"quantize", l3, q4, "q4_0"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  r = edgelm({"run", "-m", q4, "-p", "Hello", "-n", "4", "--ignore-eos"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The gemma3-1b, gemma4-e2b and phi4-mini shapes at their real widths (one layer, a 600-token vocabulary
// padded from tok512, phi4-mini's context cut to 8192 so the long LongRoPE factors still apply):
// written by synth, described by info, run, benchmarked, quantized to Q4_0 and run again.
TEST(Cli, SynthGemmaAndPhi4MiniShapes) {
  TempDir dir;
  struct ShapeCase {
    const char* shape;
    std::vector<std::string> extra;
    std::vector<const char*> info;
  };
  const std::vector<ShapeCase> cases = {
      {"gemma3-1b",
       {},
       {"arch gemma3, n_embd 1152, n_layer 1, n_head 4, n_head_kv 1, head_dim 256, n_rot 256, n_ff 6912",
        "sliding window 512: 1 local layers of 1 (rope_base 10000)", "post-norms, GELU-tanh FFN",
        "blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight", "[1152, 600]"}},
      {"gemma4-e2b",
       {},
       {"arch gemma4, n_embd 1536, n_layer 1, n_head 8, n_head_kv 1, head_dim 512, n_rot 512, n_ff 6144",
        "gemma4: local head_dim 256 (n_rot 256), 0 shared-KV layers (1 with K/V), per-layer embeddings 256",
        "per_layer_token_embd.weight", "[256, 600]", "blk.0.inp_gate.weight", "rope_freqs.weight"}},
      {"phi4-mini",
       {"--ctx", "8192"},
       {"arch phi3, n_embd 3072, n_layer 1, n_head 24, n_head_kv 8, head_dim 128, n_rot 96, n_ff 8192",
        "LongRoPE: short/long factors, original ctx 4096", "blk.0.attn_qkv.weight", "[3072, 5120]", "[3072, 16384]",
        "rope_factors_long.weight"}},
  };
  for (const ShapeCase& c : cases) {
    SCOPED_TRACE(c.shape);
    const std::string out = dir.file(std::string(c.shape) + ".gguf"), q4 = dir.file(std::string(c.shape) + "-q4.gguf");
    std::vector<std::string> args = {"synth",     "-o",  out,       "--shape",           c.shape,  "--layers", "1",
                                     "--n-vocab", "600", "--vocab", model("tok512.bin"), "--type", "f16"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    auto s = edgelm(args);
    ASSERT_EQ(s.exit_code, 0) << s.err;
    auto i = edgelm({"info", out});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    for (const char* needle : c.info) EXPECT_NE(i.out.find(needle), std::string::npos) << needle << " in " << i.out;
    auto r =
        edgelm({"run", "-m", out, "-p", "Once upon a time", "-n", "6", "--temp", "0", "--ignore-eos", "-c", "1024"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("generated: 6 "), std::string::npos) << r.err;
    auto b =
        edgelm({"bench", "-m", out, "-p", "8", "-n", "2", "-r", "1", "-t", "2", "-o", "json", "--membw-gbs", "10"});
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const auto j = nlohmann::json::parse(b.out);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_GT(j[1].at("tok_s").get<double>(), 0.0);
    auto q = edgelm({"quantize", out, q4, "q4_0", "-t", "2"});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    r = edgelm({"run", "-m", q4, "-p", "Once upon a time", "-n", "4", "--temp", "0", "--ignore-eos", "-c", "1024"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("generated: 4 "), std::string::npos) << r.err;
  }
}

TEST(Cli, BenchReportsEveryField) {
  auto r = edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-p", "16", "-n", "4", "-r", "2", "-t", "1", "-o",
                   "json", "--membw-mib", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].at("test"), "pp16");
  EXPECT_EQ(j[1].at("test"), "tg4");
  for (const auto& t : j) {
    EXPECT_EQ(t.at("type"), "F32");
    EXPECT_EQ(t.at("threads"), 1);
    EXPECT_GT(t.at("tok_s").get<double>(), 0.0);
    EXPECT_LE(t.at("tok_s_min").get<double>(), t.at("tok_s").get<double>());
    EXPECT_GE(t.at("tok_s_max").get<double>(), t.at("tok_s").get<double>());
    // Two reps: the median is their mean, not the faster one.
    EXPECT_DOUBLE_EQ(t.at("tok_s").get<double>(),
                     (t.at("tok_s_min").get<double>() + t.at("tok_s_max").get<double>()) / 2.0);
    EXPECT_GT(t.at("gb_s").get<double>(), 0.0);
    EXPECT_GT(t.at("bw_fraction").get<double>(), 0.0);
  }
  // The decode prefetch distance in force (kernels/prefetch.h): EDGELM_DECODE_PREFETCH, or a
  // warning and the CPU's default for a bad value.
  auto p = run_process({"/usr/bin/env", "EDGELM_DECODE_PREFETCH=2048", EDGELM_BIN, "bench", "-m",
                        model("stories260K-f32.gguf"), "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-o", "json",
                        "--membw-gbs", "10"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out).at(0).at("decode_prefetch_bytes"), 2048);
  auto bad = run_process({"/usr/bin/env", "EDGELM_DECODE_PREFETCH=2k", EDGELM_BIN, "bench", "-m",
                          model("stories260K-f32.gguf"), "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--membw-gbs",
                          "10"});
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.err.find("EDGELM_DECODE_PREFETCH=2k ignored"), std::string::npos) << bad.err;
  if (bad.out.find("kernels scalar") == std::string::npos && bad.out.find("kernels neon") == std::string::npos) {
    EXPECT_NE(bad.out.find("(decode prefetch "), std::string::npos) << bad.out;
  }
  // Depth rows: the engine's context is sized past the model's trained 512 positions.
  auto d = edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-p", "8", "-n", "2", "-d", "0,600", "-r", "1", "-t",
                   "1", "-o", "json", "--membw-gbs", "10", "--kv-type", "q8_0"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const auto jd = nlohmann::json::parse(d.out);
  ASSERT_EQ(jd.size(), 4u);
  EXPECT_EQ(jd[0].at("test"), "pp8");
  EXPECT_FALSE(jd[0].contains("n_depth"));
  EXPECT_EQ(jd[2].at("test"), "pp8@d600");
  EXPECT_EQ(jd[3].at("test"), "tg2@d600");
  for (const auto& t : jd) {
    EXPECT_EQ(t.at("kv_type"), "q8_0");
    EXPECT_GT(t.at("tok_s").get<double>(), 0.0);
  }
  EXPECT_EQ(jd[3].at("n_depth"), 600);
  expect_clean_error(edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-d", "5,x"}), "-d: 'x'");
  // -p and -n take lists, as llama-bench does: one test per entry, pp tests first.
  auto l = edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-p", "4,8", "-n", "2,3", "-r", "1", "-t", "1", "-o",
                   "json", "--membw-gbs", "10"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  const auto jl = nlohmann::json::parse(l.out);
  ASSERT_EQ(jl.size(), 4u);
  EXPECT_EQ(jl[0].at("test"), "pp4");
  EXPECT_EQ(jl[1].at("test"), "pp8");
  EXPECT_EQ(jl[2].at("test"), "tg2");
  EXPECT_EQ(jl[3].at("test"), "tg3");
  expect_clean_error(edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-p", "8,-1"}), "-p");
  expect_clean_error(edgelm({"bench", "-m", model("stories260K-f32.gguf"), "-p", "4,8", "--concurrency", "1,2"}),
                     "one -p");
  auto md =
      edgelm({"bench", "-m", model("stories260K-f16.gguf"), "-p", "8", "-n", "2", "-r", "1", "--membw-gbs", "10"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| F16 | "), std::string::npos) << md.out;
  auto bw = edgelm({"bench", "--membw", "--membw-mib", "16", "-t", "1"});
  ASSERT_EQ(bw.exit_code, 0) << bw.err;
  EXPECT_NE(bw.out.find("GB/s"), std::string::npos);
  EXPECT_NE(edgelm({"bench", "-p", "8"}).exit_code, 0);  // --model is required without --membw
}

// --concurrency: one row per level with the end-to-end aggregate (prefill included) and the
// decode phase's, which has no tokens when each request generates one.
TEST(Cli, BenchConcurrencyReportsTheDecodePhase) {
  auto r = edgelm({"bench", "-m", model("stories260K-f32.gguf"), "--concurrency", "1,3", "-p", "6", "-n", "5", "-t",
                   "1", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].at("concurrency"), 1);
  EXPECT_EQ(j[1].at("concurrency"), 3);
  for (const auto& t : j) {
    EXPECT_GT(t.at("decode_tok_s").get<double>(), 0.0);
    EXPECT_GT(t.at("decode_phase_tok_s").get<double>(), 0.0);
  }
  auto one = edgelm({"bench", "-m", model("stories260K-f32.gguf"), "--concurrency", "2", "-p", "6", "-n", "1", "-t",
                     "1", "-o", "json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto j1 = nlohmann::json::parse(one.out);
  ASSERT_EQ(j1.size(), 1u);
  EXPECT_GT(j1[0].at("decode_tok_s").get<double>(), 0.0);
  EXPECT_EQ(j1[0].at("decode_phase_tok_s").get<double>(), 0.0);
}

TEST(Cli, QuantizeThenRun) {
  TempDir dir;
  const std::string out = dir.file("q8.gguf");
  auto q = edgelm({"quantize", model("stories260K.bin"), out, "q8_0", "--tokenizer", model("tok512.bin"), "-t", "2"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.err.find("Q8_0 x"), std::string::npos) << q.err;
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  auto f = format::read_gguf(out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->find_tensor("blk.2.attn_v.weight")->type, DType::q8_0);
  auto r = edgelm({"run", "-m", out, "-p", "Once upon a time", "-n", "30", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.out.size(), 30u);
  expect_clean_error(edgelm({"quantize", model("stories260K-f32.gguf"), dir.file("x.gguf"), "q3_xl"}),
                     "unknown quantization type 'q3_xl'");
  expect_clean_error(edgelm({"quantize", out, out, "q4_0"}), "same file");
  expect_clean_error(edgelm({"quantize", dir.file("missing.gguf"), dir.file("y.gguf"), "q4_0"}), "missing.gguf");
  // The presets the reference refuses without an importance matrix: an error before reading the model.
  for (const char* p : {"iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m"})
    expect_clean_error(edgelm({"quantize", dir.file("missing.gguf"), dir.file("x.gguf"), p}),
                       std::string(p) + " needs an importance matrix: pass --imatrix FILE");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

// `edgelm imatrix` writes both formats from a text, and `quantize --imatrix` uses either; bad
// files and mismatched matrices are clean errors naming them.
TEST(Cli, ImatrixThenQuantizeWithIt) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 4; ++i) text += golden_text(0) + "\n";
  write_file(dir.file("calib.txt"), text);
  auto im = edgelm({"imatrix", "-m", model("stories260K-f32.gguf"), "-f", dir.file("calib.txt"), "-o", dir.file("im.dat"),
                    "-c", "64", "--chunks", "3", "-t", "2"});
  ASSERT_EQ(im.exit_code, 0) << im.err;
  EXPECT_NE(im.out.find("[3]"), std::string::npos) << im.out;
  EXPECT_NE(im.out.find("Final estimate: PPL = "), std::string::npos) << im.out;
  EXPECT_NE(im.err.find("35 entries from 3 chunks"), std::string::npos) << im.err;
  auto img = edgelm({"imatrix", "-m", model("stories260K-f32.gguf"), "-f", dir.file("calib.txt"), "-o",
                     dir.file("im.gguf"), "-c", "64", "--chunks", "3", "-t", "2"});
  ASSERT_EQ(img.exit_code, 0) << img.err;
  auto g = format::read_gguf(dir.file("im.gguf"));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(*g->metadata.get_string("general.type"), "imatrix");
  EXPECT_EQ(*g->metadata.get_u32("imatrix.chunk_count"), 3u);
  ASSERT_NE(g->find_tensor("blk.0.attn_q.weight.in_sum2"), nullptr);
  EXPECT_EQ(g->find_tensor("blk.0.attn_q.weight.counts")->ne[1], 1);

  for (const char* file : {"im.dat", "im.gguf"}) {
    SCOPED_TRACE(file);
    const std::string out = dir.file(std::string(file) + ".q4_0.gguf");
    auto q = edgelm({"quantize", "--imatrix", dir.file(file), model("stories260K-f32.gguf"), out, "q4_0", "-t", "2"});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    // 5 layers x (q, k, v, output): 64 columns; ffn_gate/up (64 columns) too; ffn_down has 172 (F16).
    EXPECT_NE(q.err.find("30 tensors quantized with importance weights"), std::string::npos) << q.err;
    auto f = format::read_gguf(out);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(*f->metadata.get_string("quantize.imatrix.file"), dir.file(file));
    auto r = edgelm({"run", "-m", out, "-p", "Once upon a time", "-n", "20", "--temp", "0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  expect_clean_error(edgelm({"quantize", "--imatrix", dir.file("none.dat"), model("stories260K-f32.gguf"),
                             dir.file("x.gguf"), "q4_k_m"}),
                     "none.dat");
  write_file(dir.file("junk.dat"), "not an imatrix");
  expect_clean_error(edgelm({"quantize", "--imatrix", dir.file("junk.dat"), model("stories260K-f32.gguf"),
                             dir.file("x.gguf"), "q4_k_m"}),
                     "junk.dat");
  // A matrix for another model (rand-small: 256 columns where stories has 64).
  auto other = edgelm({"imatrix", "-m", model("interop/rand-small-f32.gguf"), "-f", dir.file("calib.txt"), "-o",
                       dir.file("other.dat"), "-c", "64", "--chunks", "1", "-t", "2"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  expect_clean_error(edgelm({"quantize", "--imatrix", dir.file("other.dat"), model("stories260K-f32.gguf"),
                             dir.file("x.gguf"), "q4_0"}),
                     "blk.0.attn_q.weight");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
  expect_clean_error(edgelm({"imatrix", "-m", model("stories260K-f32.gguf"), "-f", dir.file("missing.txt")}),
                     "missing.txt");
  expect_clean_error(edgelm({"imatrix", "-m", model("stories260K-f32.gguf"), "-f", dir.file("calib.txt"), "-o",
                             dir.file("y.dat"), "--chunk", "1000"}),
                     "--chunk 1000");
  expect_clean_error(edgelm({"imatrix", "-m", model("stories260K-f32.gguf"), "-f", dir.file("calib.txt"), "-o",
                             dir.file("y.dat"), "-c", "100000"}),
                     "fewer than one chunk");
  EXPECT_FALSE(std::filesystem::exists(dir.file("y.dat")));
}

TEST(Cli, InfoPrintsMetadataAndTensors) {
  auto r = edgelm({"info", model("stories260K-f16.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"GGUF v3", "general.architecture", "tokenizer.ggml.tokens",
                        "[512 x string:", "blk.4.ffn_down.weight", "F16", "[172, 64]", "n_head_kv 4"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  auto b = edgelm({"info", model("stories260K.bin")});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("llama.context_length"), std::string::npos);
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* sub : {"run", "info", "convert", "synth", "bench", "quantize", "tokenize", "detokenize"}) {
    auto r = edgelm({sub, "--help"});
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("--"), std::string::npos) << sub;
  }
  EXPECT_NE(edgelm({}).exit_code, 0);
  EXPECT_NE(edgelm({"frobnicate"}).exit_code, 0);
}

TEST(Cli, BadInputsAreOneClearLine) {
  TempDir dir;
  expect_clean_error(edgelm({"run", "-m", "/nonexistent.gguf", "-p", "x"}), "/nonexistent.gguf");
  write_file(dir.file("text.gguf"), "this is not a model, just some text that is long enough");
  expect_clean_error(edgelm({"run", "-m", dir.file("text.gguf"), "-p", "x"}), "neither a GGUF file nor a llama2.c");
  // A GGUF cut in the middle of its tensor data.
  const std::string f16 = read_file(model("stories260K-f16.gguf"));
  write_file(dir.file("cut.gguf"), std::string_view(f16).substr(0, f16.size() / 2));
  expect_clean_error(edgelm({"run", "-m", dir.file("cut.gguf"), "-p", "x"}), "truncated");
  write_file(dir.file("cut2.gguf"), std::string_view(f16).substr(0, 3000));
  expect_clean_error(edgelm({"info", dir.file("cut2.gguf")}), "truncated");
  // Absurd llama2.c header.
  std::string bin = read_file(model("stories260K.bin"));
  const int32_t layers = 1 << 28;
  std::memcpy(bin.data() + 8, &layers, 4);
  write_file(dir.file("absurd.bin"), bin);
  expect_clean_error(edgelm({"run", "-m", dir.file("absurd.bin"), "--tokenizer", model("tok512.bin"), "-p", "x"}),
                     "n_layers");
  // Vocabulary that does not fit the model.
  expect_clean_error(
      edgelm({"run", "-m", model("stories260K.bin"), "--tokenizer", model("llama2-tokenizer.bin"), "-p", "x"}),
      "vocab/model mismatch");
  // llama2.c checkpoint without its vocabulary.
  expect_clean_error(edgelm({"run", "-m", model("stories260K.bin"), "-p", "x"}), "--tokenizer");
  // Unknown architecture and tensor type, named.
  auto f = format::read_gguf(model("stories260K-f32.gguf"));
  ASSERT_TRUE(f.ok());
  f->metadata.set("general.architecture", format::GgufValue::from_string("rwkv9"));
  ASSERT_TRUE(format::write_gguf(dir.file("arch.gguf"), *f).ok());
  expect_clean_error(edgelm({"run", "-m", dir.file("arch.gguf"), "-p", "x"}), "'rwkv9'");
  for (auto& t : f->tensors)
    if (t.name == "blk.0.attn_k.weight") t.type = DType::i32;  // a valid type without kernels
  f->metadata.set("general.architecture", format::GgufValue::from_string("llama"));
  ASSERT_TRUE(format::write_gguf(dir.file("i32.gguf"), *f).ok());
  expect_clean_error(edgelm({"run", "-m", dir.file("i32.gguf"), "-p", "x"}), "type I32");
  // Prompt longer than the context.
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "Once upon a time ";
  expect_clean_error(edgelm({"run", "-m", model("stories260K-f32.gguf"), "-c", "64", "-p", prompt}),
                     "more than the context of 64");
  // Bad flag values.
  expect_clean_error(edgelm({"run", "-m", model("stories260K-f32.gguf"), "-p", "x", "--top-p", "1.5"}), "top_p");
  auto neg = edgelm({"run", "-m", model("stories260K-f32.gguf"), "-p", "x", "-n", "-3"});
  EXPECT_NE(neg.exit_code, 0);
  EXPECT_FALSE(neg.signaled);
  // convert refuses a GGUF input and an unwritable output.
  expect_clean_error(
      edgelm({"convert", model("stories260K-f32.gguf"), "--tokenizer", model("tok512.bin"), "-o", dir.file("x.gguf")}),
      "already a GGUF");
  expect_clean_error(edgelm({"convert", model("stories260K.bin"), "--tokenizer", model("tok512.bin"), "-o",
                             "/nonexistent-dir/out.gguf"}),
                     "/nonexistent-dir/out.gguf");
}

}  // namespace
}  // namespace edgelm::test
