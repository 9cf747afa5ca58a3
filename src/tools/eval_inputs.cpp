#include "tools/eval_inputs.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace edgelm::tools {
namespace {

// Plain, simple prose in the style of children's stories (written for this tool), a few hundred
// tokens for a Llama vocabulary.
constexpr const char* kDefaultText =
    "Once upon a time, there was a little girl named Lily. She lived in a small house with her mom, her dad and "
    "a big brown dog called Max. Every morning Lily and Max went to the park to play.\n\n"
    "One day, Lily saw a red bird sitting on a tree. The bird looked sad. \"Why are you sad, little bird?\" Lily "
    "asked. The bird said, \"I lost my nest in the wind. Now I have no home.\" Lily felt sorry for the bird. She "
    "wanted to help.\n\n"
    "Lily ran home and told her mom about the bird. Her mom smiled and gave her some sticks, some soft grass and "
    "a little box. \"We can make a new home for the bird,\" said Mom. Lily and her mom worked together. They put "
    "the grass in the box and tied the sticks around it. It was a very nice nest.\n\n"
    "The next day, Lily and Max took the nest to the park. Dad helped Lily put it high up in the tree. The red "
    "bird flew down and looked at the nest. Then it sang a happy song and sat inside. Lily clapped her hands. "
    "Max wagged his tail and barked.\n\n"
    "From that day on, the red bird sang to Lily every morning when she came to the park. Lily was very happy. "
    "She learned that when you help a friend, you make two hearts glad.\n";

const std::vector<std::string> kDefaultPrompts = {
    "Once upon a time",
    "Tom and his dog",
    "One day, a little bird",
    "The sun was shining and Sue wanted to",
};

}  // namespace

const char* eval_default_text() { return kDefaultText; }
const std::vector<std::string>& eval_default_prompts() { return kDefaultPrompts; }

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<std::vector<std::string>> read_eval_prompts(const std::string& path) {
  EDGELM_TRY(std::string text, read_text_file(path));
  std::vector<std::string> prompts;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string prompt;
    for (size_t i = 0; i < line.size(); ++i) {
      const bool escape = line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n';
      prompt += escape ? '\n' : line[i];
      i += escape ? 1 : 0;
    }
    prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) return make_error("no prompts in '{}' (one per line)", path);
  return prompts;
}

std::string dominant_type(const engine::LoadedModel& lm) { return dominant_type(lm.model->file()); }

std::string dominant_type(const format::ModelFile& f) {
  std::vector<std::pair<uint64_t, DType>> bytes;
  for (const auto& t : f.tensors) {
    auto it = std::find_if(bytes.begin(), bytes.end(), [&](const auto& b) { return b.second == t.type; });
    if (it == bytes.end())
      bytes.emplace_back(t.n_bytes, t.type);
    else
      it->first += t.n_bytes;
  }
  if (bytes.empty()) return "?";
  return std::string(dtype_name(std::max_element(bytes.begin(), bytes.end())->second));
}

}  // namespace edgelm::tools
