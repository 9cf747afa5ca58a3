// The WordNet 3.0 database of the Debian package wordnet-base (scripts/setup.sh installs it),
// loaded once for all cache tests. A machine without it fails the tests that need it, naming
// the package: the opposites guard and the lexical embedder's WordNet mode are not optional.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "cache/wordnet.h"

namespace edgelm::cache {

inline std::shared_ptr<const WordNet> test_wordnet() {
  static const std::shared_ptr<const WordNet> wn = [] {
    auto r = WordNet::load();
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : nullptr;
  }();
  return wn;
}

}  // namespace edgelm::cache
