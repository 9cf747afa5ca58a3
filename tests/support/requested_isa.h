// For test binaries that CTest runs once per ISA with EDGELM_ISA=<name> (golden_isa_*): where this
// CPU or build lacks that ISA the kernels would fall back to another one, so every test says
// SKIPPED instead (CTest reports it as skipped) rather than passing on a path it did not run.
// Include from exactly one source file of the binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/isa.h"

namespace edgelm::test {

class RequestedIsa : public testing::Environment {
 public:
  void SetUp() override {
    const kernels::IsaChoice choice = kernels::choose_isa(std::getenv("EDGELM_ISA"));
    if (!choice.warning.empty()) GTEST_SKIP() << "EDGELM_ISA not available here: " << choice.warning;
  }
};
inline const testing::Environment* const kRequestedIsa = testing::AddGlobalTestEnvironment(new RequestedIsa);

}  // namespace edgelm::test
