// Importance matrices: per weight matrix, the mean square of each input column's activations
// over a calibration text, which the quantizers use to weigh each weight's error
// (kernels/quants_weighted.h). Files in llama.cpp's two formats are read and written:
//  - GGUF (upstream llama-imatrix since mid 2025): general.type = "imatrix", imatrix.datasets
//    (array of strings), imatrix.chunk_count and imatrix.chunk_size (u32); per matrix NAME two
//    F32 tensors NAME.in_sum2 [n_cols, n_mat] (sums of x^2) and NAME.counts [1, n_mat] (the rows
//    summed per matrix; n_mat > 1 for a 3-D expert tensor, one matrix per expert).
//  - legacy .dat (ik_llama.cpp's llama-imatrix, older upstream): little-endian i32 entry count;
//    per entry an i32 name length, the name, i32 ncall, i32 nval and nval f32 values that are
//    mean(x^2) * ncall; then, optionally, i32 chunk count (the last call's index) and an i32-length
//    dataset file name.
// Both load into one shape (ImatrixEntry: sums, and per matrix the divisor), so the mean a
// quantizer gets is sums / count either way (legacy: value / ncall; a zero count reads as 1, as
// the reference does).
//
// Invariants: every entry has counts.size() >= 1 and sums.size() a multiple of it; the readers
// check every length against the bytes that remain, reject non-finite values and negative
// counts, and name the file (and entry) in every error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"
#include "model/ops.h"

namespace edgelm::model {

struct ImatrixEntry {
  std::vector<float> sums;    // [n_mat * n_cols] sums of x^2 per input column, matrix-major
  std::vector<float> counts;  // [n_mat] activation rows summed into each matrix's sums
  int32_t n_call = 0;         // forward steps that fed it (the legacy format's ncall)

  int64_t n_mat() const { return static_cast<int64_t>(counts.size()); }
  int64_t n_cols() const { return counts.empty() ? 0 : static_cast<int64_t>(sums.size()) / n_mat(); }
  // [n_mat * n_cols] mean square per column: sums / count (1 where the count is 0).
  std::vector<float> means() const;
};

struct ImportanceMatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight name, e.g. "blk.0.attn_q.weight"
  std::vector<std::string> datasets;            // calibration text file names
  int32_t chunk_count = 0;
  int32_t chunk_size = 0;  // tokens per chunk (GGUF only; 0 when unknown)
};

enum class ImatrixFormat { gguf, dat };

// Reads either format (GGUF when the file starts with "GGUF").
Result<ImportanceMatrix> read_imatrix(const std::string& path);
Result<ImportanceMatrix> parse_imatrix_dat(const uint8_t* data, size_t size, const std::string& path);
Result<ImportanceMatrix> imatrix_from_gguf(const format::ModelFile& file, const std::string& path);

// Writes `m` in `format`. Legacy: values are sums / count * n_call per entry (one count per
// entry, so every matrix of an entry must have the same count), then the largest n_call and the
// first dataset name. GGUF: the keys and tensor pairs above.
Status write_imatrix(const std::string& path, const ImportanceMatrix& m, ImatrixFormat format);

// The importances for quantizing tensor `t` ([ne0 * ne2] means, one row of ne0 per expert), or
// nullopt when the matrix has no entry for it. ffn_gate falls back to ffn_up's entry (both read
// the same activations). Error (naming the file, tensor and both sizes): an entry whose length
// is not ne0 * ne2.
Result<std::optional<std::vector<float>>> imatrix_weights_for(const ImportanceMatrix& m, const format::TensorInfo& t,
                                                               const std::string& path);

// Accumulates activations into an ImportanceMatrix as llama-imatrix does: for each observed
// product W x over n_tok rows, sums[c] += x[t, c]^2 (fused multiply-add, token order) and the
// matrix's count += n_tok, n_call += 1. As a LinearObserver (model/ops.h) it names each weight by
// the tensor of `file` its bytes lie in (the loaded model's weights point into its file) and
// collects the blk.* tensors, as the reference does by default (not token_embd / output); a 3-D
// tensor's expert is found from the offset, one matrix per expert.
class ImatrixCollector : public LinearObserver {
 public:
  ImatrixCollector() = default;  // add() only
  explicit ImatrixCollector(const format::ModelFile& file);

  void observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tok) override;
  // x: [n_tok, n_cols] row-major, into matrix `mat` of `n_mat`. A name seen before with another
  // shape is a programming error.
  void add(const std::string& name, const float* x, int64_t n_tok, int64_t n_cols, int64_t mat = 0,
           int64_t n_mat = 1);
  ImportanceMatrix& matrix() { return m_; }
  const ImportanceMatrix& matrix() const { return m_; }

 private:
  struct Range {
    const uint8_t* begin;
    const uint8_t* end;
    const format::TensorInfo* tensor;
  };
  std::vector<Range> ranges_;  // the file's blk.* matrices, by address
  ImportanceMatrix m_;
};

}  // namespace edgelm::model
