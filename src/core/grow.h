// grow(): the one way reusable scratch vectors are sized in the hot paths (kernels' matmul
// scratch, the vision encoder's buffers).
//
// Invariant: a vector only ever gets larger. Resizing to each call's size instead would
// value-initialize (zero) the elements regained whenever a call follows a smaller one: the
// vision attention's matmuls alternate between head_dim- and token-long rows, and that memset
// was 3% of a SmolVLM encode. Callers must not rely on the contents past what they write
// (tests/kernels/test_gemm.cpp: Matmul.ScratchContentsDoNotMatter).
#pragma once

#include <cstddef>
#include <vector>

namespace edgelm {

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace edgelm
