// The reference tokenizer test vectors of shared/vocab: NAME.gguf.inp holds strings, each
// followed by "\n__ggml_vocab_test__\n" (so a string may be empty or contain newlines);
// NAME.gguf.out holds, line by line, the expected ids of each string (no BOS).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace edgelm::test {

struct VocabVector {
  std::string text;
  std::vector<int32_t> ids;
};

// Reads BASE.inp and BASE.out (BASE is the .gguf path); malformed files are test failures.
std::vector<VocabVector> read_vocab_vectors(const std::string& base);

}  // namespace edgelm::test
