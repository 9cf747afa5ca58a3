// A model file changed on disk while it is loaded (README: replacing a model file).
//  - --no-mmap (LoadOptions::no_mmap) gives the same greedy text as the mapped load and the
//    goldens, and the file can then be rewritten in place, truncated and deleted without effect.
//  - Replacing a mapped model by rename (write a new file, rename it over the path) is safe:
//    the loaded model computes the same logits, and a fresh load gets the new model.
//  - Truncating a mapped model in place is not: the next forward dies of SIGBUS. That is why
//    the README says never to do it without --no-mmap; the test pins the hazard down.
// Every case runs with projection packing off (EDGELM_PACK=0) as well, so that every weight is
// read from the file's bytes rather than from the packed copies made at load.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "support/greedy_goldens.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

namespace fs = std::filesystem;

using test::GoldenCase;
using test::load_cases;

std::string greedy(const LoadedModel& lm, const GoldenCase& c) {
  GenerateOptions opts;
  opts.n_predict = c.n_predict;
  opts.sampling.temperature = 0.0f;
  ThreadPool pool(2);
  std::string text;
  auto stats = generate(lm, c.prompt, opts, pool, [&](std::string_view s) {
    text += s;
    return true;
  });
  EXPECT_TRUE(stats.ok()) << stats.error().message;
  while (!text.empty() && text.back() == '\n') text.pop_back();  // the goldens trim trailing newlines
  return text;
}

// The reference forward's logits after a fixed prompt: [n_vocab].
std::vector<float> logits_of(const LoadedModel& lm) {
  const auto tokens = lm.tokenizer->encode("Once upon a time, there was a little", true, false);
  ThreadPool pool(2);
  model::KvCache cache(lm.model->config(), 64);
  std::vector<float> logits(static_cast<size_t>(lm.model->config().n_vocab));
  const Status st = lm.model->forward(tokens, cache, logits, pool);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return logits;
}

// Rewrites a file's bytes in place (same inode, same size) with garbage.
void scribble_in_place(const std::string& path) {
  const auto size = static_cast<size_t>(fs::file_size(path));
  std::string junk(size, '\0');
  for (size_t i = 0; i < size; ++i) junk[i] = static_cast<char>((i * 2654435761u) >> 13);
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  ::close(fd);
}

// A model in a scratch folder: a copy of a shared file (GGUF, or a llama2.c .bin + tokenizer).
struct ModelCopy {
  test::TempDir dir;
  std::string path, tokenizer;
  ModelCopy(const std::string& shared_model, const std::string& shared_tokenizer) {
    path = dir.file(fs::path(shared_model).filename().string());
    fs::copy_file(test::shared_path(shared_model), path);
    if (!shared_tokenizer.empty()) tokenizer = test::shared_path(shared_tokenizer);
  }
};

struct Case {
  const char* model;
  const char* tokenizer;  // llama2.c checkpoints only
  bool pack;              // projections packed at load (the default) or read from the file
};

class ModelFileFaults : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const char* old = std::getenv("EDGELM_PACK");
    had_pack_ = old != nullptr;
    if (had_pack_) old_pack_ = old;
    if (pack())
      ::unsetenv("EDGELM_PACK");
    else
      ::setenv("EDGELM_PACK", "0", 1);
  }
  void TearDown() override {
    if (had_pack_)
      ::setenv("EDGELM_PACK", old_pack_.c_str(), 1);
    else
      ::unsetenv("EDGELM_PACK");
  }
  std::string model() const { return GetParam().model; }
  std::string tokenizer() const { return GetParam().tokenizer; }
  bool pack() const { return GetParam().pack; }

 private:
  bool had_pack_ = false;
  std::string old_pack_;
};

TEST_P(ModelFileFaults, NoMmapMatchesTheMappedLoadAndSurvivesTheFileBeingDestroyed) {
  ModelCopy m(model(), tokenizer());
  auto copy = load_model(m.path, m.tokenizer, format::LoadOptions{.no_mmap = true});
  ASSERT_TRUE(copy.ok()) << copy.error().message;
  const std::vector<float> before = logits_of(*copy);
  const auto cases = load_cases();
  {
    // Unmapped again before the file is destroyed (it would SIGBUS, see below).
    auto mapped = load_model(m.path, m.tokenizer);
    ASSERT_TRUE(mapped.ok()) << mapped.error().message;
    EXPECT_EQ(logits_of(*mapped), before);
    for (const GoldenCase& c : cases) EXPECT_EQ(greedy(*copy, c), greedy(*mapped, c)) << c.prompt;
  }

  // Everything an operator could do to the file: garbage over it in place, cut it, delete it.
  scribble_in_place(m.path);
  ASSERT_EQ(::truncate(m.path.c_str(), 0), 0);
  ASSERT_EQ(std::remove(m.path.c_str()), 0);

  EXPECT_EQ(logits_of(*copy), before);
  for (const GoldenCase& c : cases) EXPECT_EQ(greedy(*copy, c), c.text) << c.prompt;
}

TEST_P(ModelFileFaults, RenameOverAMappedModelKeepsTheLoadedOneAndAFreshLoadGetsTheNew) {
  ModelCopy m(model(), tokenizer());
  auto lm = load_model(m.path, m.tokenizer);
  ASSERT_TRUE(lm.ok()) << lm.error().message;
  const std::vector<float> before = logits_of(*lm);
  const int32_t n_layer_before = lm->model->config().n_layer;

  // The safe replacement: a different model written beside it, renamed over the path.
  const std::string staged = m.dir.file(".staged.bin");
  fs::copy_file(test::shared_path("models/aidreams260K.bin"), staged);
  ASSERT_EQ(std::rename(staged.c_str(), m.path.c_str()), 0);

  EXPECT_EQ(logits_of(*lm), before);
  for (const GoldenCase& c : load_cases()) EXPECT_EQ(greedy(*lm, c), c.text) << c.prompt;
  auto fresh = load_model(m.path, test::shared_path("models/aidreams-tok512.bin"));
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_EQ(fresh->model->config().n_layer, 4);  // aidreams260K, not stories260K (5 layers)
  EXPECT_NE(fresh->model->config().n_layer, n_layer_before);
  EXPECT_NE(logits_of(*fresh), before);
}

// The hazard --no-mmap removes: a mapped model whose file is truncated in place dies of SIGBUS
// on its next forward (pages past the new end of file cannot be read).
// (A plain fork rather than a death test: the child must not re-run the fixture, and the
// parent's scratch folder must be cleaned up.)
TEST_P(ModelFileFaults, TruncatingAMappedModelInPlaceIsSigbus) {
  ModelCopy m(model(), tokenizer());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The default action, even where a sanitizer installed its own SIGBUS handler.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &dfl, nullptr);
    auto lm = load_model(m.path, m.tokenizer);
    if (!lm.ok()) std::_Exit(3);
    if (::truncate(m.path.c_str(), 0) != 0) std::_Exit(4);
    logits_of(*lm);
    std::_Exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelFileFaults,
                         testing::Values(Case{"models/stories260K.bin", "models/tok512.bin", true},
                                         Case{"models/stories260K.bin", "models/tok512.bin", false},
                                         Case{"models/stories260K-f32.gguf", "", true},
                                         Case{"models/stories260K-f32.gguf", "", false},
                                         Case{"models/stories260K-f16.gguf", "", true},
                                         Case{"models/stories260K-f16.gguf", "", false}),
                         [](const testing::TestParamInfo<Case>& info) {
                           std::string name = fs::path(info.param.model).filename().string();
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name + (info.param.pack ? "_packed" : "_unpacked");
                         });

}  // namespace
}  // namespace edgelm::engine
