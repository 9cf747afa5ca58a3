#include "support/vocab_vectors.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string_view>

#include "support/test_data.h"

namespace edgelm::test {

std::vector<VocabVector> read_vocab_vectors(const std::string& base) {
  const std::string inp = read_file(base + ".inp");
  const std::string out = read_file(base + ".out");
  EXPECT_FALSE(inp.empty()) << base << ".inp is missing or empty";
  constexpr std::string_view kSep = "\n__ggml_vocab_test__\n";
  std::vector<VocabVector> vectors;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(kSep, pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << base << ".inp: text after the last separator";
      break;
    }
    vectors.push_back({inp.substr(pos, end - pos), {}});
    pos = end + kSep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t n_lines = 0;
  for (; std::getline(lines, line); ++n_lines) {
    if (n_lines >= vectors.size()) continue;
    std::istringstream nums(line);
    for (int32_t id; nums >> id;) vectors[n_lines].ids.push_back(id);
  }
  EXPECT_EQ(n_lines, vectors.size()) << base << ": lines of .out vs strings of .inp";
  return vectors;
}

}  // namespace edgelm::test
