// `edgelm run --image` and `edgelm bench --image` end to end (the binary, real processes), on
// the synthetic Gemma 3 and tiny gemma3 mmproj of the server's image tests: the image goes
// before the prompt (more prompt tokens, output that depends on the image), the bench reports
// cold and warm encode times and a TTFT; a missing or corrupt file, --image without --mmproj
// and an encoder that does not fit the model are one clean error line each.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "../server/vision_model.h"
#include "serve/image_input.h"
#include "support/subprocess.h"

namespace edgelm::test {
namespace {

ProcessResult edgelm(std::vector<std::string> args) {
  args.insert(args.begin(), EDGELM_BIN);
  return run_process(args);
}

void expect_clean_error(const ProcessResult& r, const std::string& needle) {
  EXPECT_FALSE(r.signaled) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("edgelm: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
}

std::string write_png(const TempDir& dir, const char* name, const char* b64) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << *serve::base64_decode(b64);
  return path;
}

int prompt_tokens(const std::string& err) {
  const size_t at = err.find("prompt tokens: ");
  return at == std::string::npos ? -1 : std::stoi(err.substr(at + 15));
}

class ImageCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_ = write_model(*dir_, true);
    mmproj_ = write_mmproj(*dir_, kEmbd);
    red_ = write_png(*dir_, "red.png", kRedPng);
    blue_ = write_png(*dir_, "blue.png", kBluePng);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
  static std::string model_, mmproj_, red_, blue_;
};
TempDir* ImageCli::dir_ = nullptr;
std::string ImageCli::model_, ImageCli::mmproj_, ImageCli::red_, ImageCli::blue_;

TEST_F(ImageCli, RunPutsTheImagesBeforeThePrompt) {
  const std::vector<std::string> base = {"run", "-m", model_, "-p", "What is this?", "-n", "8", "--temp", "0",
                                         "--ignore-eos", "-t", "1"};
  auto text = edgelm(base);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return edgelm(args);
  };
  auto red = with({"--mmproj", mmproj_, "--image", red_});
  ASSERT_EQ(red.exit_code, 0) << red.err;
  // <start_of_image> + 4 soft tokens + <end_of_image> (with the prompt form's newlines).
  EXPECT_GE(prompt_tokens(red.err), prompt_tokens(text.err) + 6) << red.err;
  EXPECT_NE(red.err.find("image 0: " + red_), std::string::npos) << red.err;
  EXPECT_NE(red.err.find("encode:"), std::string::npos) << red.err;
  auto red_again = with({"--mmproj", mmproj_, "--image", red_});
  EXPECT_EQ(red_again.out, red.out) << "greedy: the same image gives the same text";
  auto blue = with({"--mmproj", mmproj_, "--image", blue_});
  ASSERT_EQ(blue.exit_code, 0) << blue.err;
  EXPECT_NE(blue.out, red.out) << "the output must depend on the image";
  auto two = with({"--mmproj", mmproj_, "--image", red_, "--image", blue_});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(prompt_tokens(two.err) - prompt_tokens(red.err), prompt_tokens(red.err) - prompt_tokens(text.err));

  expect_clean_error(with({"--mmproj", mmproj_, "--image", dir_->file("none.png")}), "none.png");
  const std::string corrupt = dir_->file("corrupt.png");
  std::ofstream(corrupt) << "this is not a PNG";
  expect_clean_error(with({"--mmproj", mmproj_, "--image", corrupt}), "corrupt.png");
  expect_clean_error(with({"--mmproj", mmproj_, "--image", dir_->path()}), "not a regular file");
  expect_clean_error(with({"--image", red_}), "--mmproj");
  expect_clean_error(with({"--mmproj", write_mmproj(*dir_, 32), "--image", red_}), "n_embd");
}

TEST_F(ImageCli, BenchReportsEncodeTimesAndTtft) {
  auto b = edgelm({"bench", "-m", model_, "--mmproj", mmproj_, "--image", red_, "--image", blue_, "-r", "3", "-t", "1",
                   "-o", "json"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto j = nlohmann::json::parse(b.out);
  ASSERT_EQ(j.size(), 2u) << b.out;
  for (const auto& row : j) {
    EXPECT_EQ(row["frames"], 1);
    for (const char* k : {"encode_ms_cold", "encode_ms_warm", "decode_ms", "prefill_ms", "ttft_ms"})
      EXPECT_GT(row[k].get<double>(), 0.0) << k << " in " << row.dump();
    EXPECT_GE(row["ttft_ms"].get<double>(), row["prefill_ms"].get<double>()) << row.dump();
    EXPECT_GT(row["prompt_tokens"].get<int>(), 20) << "the image and a ~20-token question";
    EXPECT_EQ(row["reps"], 3);
  }
  EXPECT_EQ(j[0]["image"], red_);
  auto md = edgelm({"bench", "-m", model_, "--mmproj", mmproj_, "--image", red_, "-r", "2", "-t", "1"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("encode ms (cold)"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("TTFT ms"), std::string::npos) << md.out;
  expect_clean_error(edgelm({"bench", "-m", model_, "--image", red_}), "--mmproj");
  expect_clean_error(edgelm({"bench", "-m", model_, "--mmproj", mmproj_, "--image", dir_->file("none.png")}),
                     "none.png");
}

// Gemma 4 from the command line alone: synth writes the gemma4-tiny text model (its --vocab padded
// with Gemma 4's image markers) and, by default for that shape, the tiny-gemma4v encoder; run
// --image puts the image's 256 soft tokens (an 8 x 8 PNG resized to 192 x 192 px) and its
// markers before the prompt; bench --image reports the encoder as dynamic-resolution.
TEST_F(ImageCli, Gemma4SynthRunAndBench) {
  const std::string lm = dir_->file("g4.gguf"), mm = dir_->file("g4-mmproj.gguf");
  auto s = edgelm({"synth", "--shape", "gemma4-tiny", "--ctx", "1024", "--n-vocab", "515", "--vocab",
                   shared_path("models/tok512.bin"), "-o", lm, "--mmproj-output", mm});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find("gemma4v projector, tiny-gemma4v shape"), std::string::npos) << s.err;
  const std::vector<std::string> base = {"run", "-m", lm, "-p", "What is this?", "-n", "4", "--temp", "0",
                                         "--ignore-eos", "-t", "1"};
  auto text = edgelm(base);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::vector<std::string> args = base;
  for (const std::string& a : {std::string("--mmproj"), mm, std::string("--image"), red_}) args.push_back(a);
  auto img = edgelm(args);
  ASSERT_EQ(img.exit_code, 0) << img.err;
  EXPECT_NE(img.err.find("1 frame(s)"), std::string::npos) << img.err;
  EXPECT_GE(prompt_tokens(img.err) - prompt_tokens(text.err), 256 + 2) << img.err;
  auto b = edgelm({"bench", "-m", lm, "--mmproj", mm, "--image", red_, "-r", "2", "-t", "1"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("gemma4v, dynamic resolution"), std::string::npos) << b.out;
}

}  // namespace
}  // namespace edgelm::test
