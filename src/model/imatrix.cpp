#include "model/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/check.h"
#include "core/mmap_file.h"
#include "format/gguf_reader.h"
#include "format/gguf_writer.h"

namespace edgelm::model {
namespace {

constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";
constexpr int32_t kMaxNameLength = 4096;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Little-endian reader over a byte range; every read is bounds-checked.
struct ByteCursor {
  const uint8_t* p;
  size_t left;
  bool read(void* out, size_t n) {
    if (n > left) return false;
    std::memcpy(out, p, n);
    p += n;
    left -= n;
    return true;
  }
  bool read_i32(int32_t* v) { return read(v, sizeof(*v)); }
};

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

}  // namespace

std::vector<float> ImatrixEntry::means() const {
  std::vector<float> out(sums.size());
  const int64_t cols = n_cols();
  for (int64_t m = 0; m < n_mat(); ++m) {
    const float c = counts[static_cast<size_t>(m)];
    for (int64_t i = 0; i < cols; ++i) {
      const size_t k = static_cast<size_t>(m * cols + i);
      out[k] = c > 0.0f ? sums[k] / c : 1.0f;
    }
  }
  return out;
}

Result<ImportanceMatrix> parse_imatrix_dat(const uint8_t* data, size_t size, const std::string& path) {
  ByteCursor in{data, size};
  int32_t n_entries = 0;
  if (!in.read_i32(&n_entries) || n_entries < 1)
    return make_error("imatrix '{}': not an importance matrix (no GGUF magic, and no legacy entry count)", path);
  ImportanceMatrix m;
  for (int32_t e = 0; e < n_entries; ++e) {
    int32_t len = 0;
    if (!in.read_i32(&len) || len < 1 || len > kMaxNameLength || static_cast<size_t>(len) > in.left)
      return make_error("imatrix '{}': entry {} of {} has a bad name length (truncated or not an imatrix file)", path,
                        e + 1, n_entries);
    std::string name(reinterpret_cast<const char*>(in.p), static_cast<size_t>(len));
    in.p += len;
    in.left -= static_cast<size_t>(len);
    int32_t ncall = 0, nval = 0;
    if (!in.read_i32(&ncall) || !in.read_i32(&nval) || nval < 1 ||
        static_cast<size_t>(nval) > in.left / sizeof(float))
      return make_error("imatrix '{}': entry '{}' is truncated or has a bad value count", path, name);
    ImatrixEntry entry;
    entry.sums.resize(static_cast<size_t>(nval));
    in.read(entry.sums.data(), entry.sums.size() * sizeof(float));
    if (!all_finite(entry.sums)) return make_error("imatrix '{}': entry '{}' has non-finite values", path, name);
    if (ncall < 0) return make_error("imatrix '{}': entry '{}' has a negative call count {}", path, name, ncall);
    entry.n_call = ncall;
    // The values are mean * ncall; the reference divides by ncall when it is positive.
    entry.counts = {ncall > 0 ? static_cast<float>(ncall) : 1.0f};
    if (!m.entries.emplace(name, std::move(entry)).second)
      return make_error("imatrix '{}': entry '{}' appears twice", path, name);
  }
  if (in.left > 0) {  // optional trailer: last call, dataset name
    int32_t last_call = 0, len = 0;
    if (!in.read_i32(&last_call) || !in.read_i32(&len) || len < 0 || static_cast<size_t>(len) != in.left)
      return make_error("imatrix '{}': unexpected {} bytes after the entries", path, in.left);
    m.chunk_count = last_call;
    if (len > 0) m.datasets.emplace_back(reinterpret_cast<const char*>(in.p), static_cast<size_t>(len));
  }
  return m;
}

Result<ImportanceMatrix> imatrix_from_gguf(const format::ModelFile& file, const std::string& path) {
  ImportanceMatrix m;
  if (auto type = file.metadata.get_string("general.type"); type.ok() && *type != "imatrix")
    return make_error("imatrix '{}': a GGUF file of type '{}', not an importance matrix", path, *type);
  EDGELM_TRY(uint32_t chunks, file.metadata.get_u32_or("imatrix.chunk_count", 0));
  EDGELM_TRY(uint32_t chunk_size, file.metadata.get_u32_or("imatrix.chunk_size", 0));
  m.chunk_count = static_cast<int32_t>(chunks);
  m.chunk_size = static_cast<int32_t>(chunk_size);
  if (const format::GgufValue* ds = file.metadata.find("imatrix.datasets"); ds != nullptr) {
    const format::GgufValue::Array* items = ds->as_array();
    if (items == nullptr) return make_error("imatrix '{}': imatrix.datasets is not an array", path);
    for (const format::GgufValue& v : *items)
      if (const std::string* s = v.as_string()) m.datasets.push_back(*s);
  }
  for (const format::TensorInfo& t : file.tensors) {
    const bool is_sums = ends_with(t.name, kSumsSuffix);
    const bool is_counts = ends_with(t.name, kCountsSuffix);
    if (!is_sums && !is_counts) continue;
    const std::string name = t.name.substr(0, t.name.size() - (is_sums ? kSumsSuffix.size() : kCountsSuffix.size()));
    if (t.type != DType::f32)
      return make_error("imatrix '{}': tensor '{}' is {}, expected F32", path, t.name, dtype_name(t.type));
    if (is_sums && m.entries.count(name) && !m.entries[name].sums.empty())
      return make_error("imatrix '{}': tensor '{}' appears twice", path, t.name);
    ImatrixEntry& e = m.entries[name];
    const auto* f = reinterpret_cast<const float*>(t.data);
    const auto n = static_cast<size_t>(t.n_elements());
    if (is_sums) {
      if (t.ne[2] != 1 || t.ne[3] != 1)
        return make_error("imatrix '{}': '{}' has shape {}, expected [n_cols, n_mat]", path, t.name, t.shape_string());
      e.sums.assign(f, f + n);
      e.n_call = -static_cast<int32_t>(t.ne[1]);  // n_mat, checked against counts below
    } else {
      if (t.ne[0] != 1 || t.ne[2] != 1 || t.ne[3] != 1)
        return make_error("imatrix '{}': '{}' has shape {}, expected [1, n_mat]", path, t.name, t.shape_string());
      e.counts.assign(f, f + n);
    }
  }
  if (m.entries.empty()) return make_error("imatrix '{}': no NAME.in_sum2 / NAME.counts tensors", path);
  for (auto& [name, e] : m.entries) {
    if (e.sums.empty() || e.counts.empty())
      return make_error("imatrix '{}': '{}' has {} but no {}", path, name, e.sums.empty() ? kCountsSuffix : kSumsSuffix,
                        e.sums.empty() ? kSumsSuffix : kCountsSuffix);
    if (-e.n_call != e.n_mat())
      return make_error("imatrix '{}': '{}' has {} matrices of sums but {} counts", path, name, -e.n_call, e.n_mat());
    if (!all_finite(e.sums) || !all_finite(e.counts))
      return make_error("imatrix '{}': '{}' has non-finite values", path, name);
    if (std::any_of(e.counts.begin(), e.counts.end(), [](float c) { return c < 0.0f; }))
      return make_error("imatrix '{}': '{}' has a negative count", path, name);
    e.n_call = static_cast<int32_t>(m.chunk_count);
  }
  return m;
}

Result<ImportanceMatrix> read_imatrix(const std::string& path) {
  EDGELM_TRY(MappedFile f, MappedFile::open(path));
  const uint8_t* data = f.data();
  const size_t size = f.size();
  uint32_t magic = 0;
  if (size >= 4) std::memcpy(&magic, data, 4);
  if (magic == format::kGgufMagic) {
    auto file = format::read_gguf(path);
    if (!file.ok()) return make_error("imatrix '{}': {}", path, file.error().message);
    return imatrix_from_gguf(*file, path);
  }
  return parse_imatrix_dat(data, size, path);
}

Status write_imatrix(const std::string& path, const ImportanceMatrix& m, ImatrixFormat format) {
  if (format == ImatrixFormat::gguf) {
    format::ModelFile f;
    f.metadata.set("general.type", format::GgufValue::from_string("imatrix"));
    format::GgufValue::Array ds;
    for (const std::string& d : m.datasets) ds.push_back(format::GgufValue::from_string(d));
    f.metadata.set("imatrix.datasets", format::GgufValue::from_array(format::GgufType::string, std::move(ds)));
    f.metadata.set("imatrix.chunk_count", format::GgufValue::from_u32(static_cast<uint32_t>(m.chunk_count)));
    f.metadata.set("imatrix.chunk_size", format::GgufValue::from_u32(static_cast<uint32_t>(m.chunk_size)));
    for (const auto& [name, e] : m.entries) {
      format::TensorInfo sums;
      sums.name = name + std::string(kSumsSuffix);
      sums.type = DType::f32;
      sums.n_dims = 2;
      sums.ne = {e.n_cols(), e.n_mat(), 1, 1};
      sums.n_bytes = e.sums.size() * sizeof(float);
      sums.data = reinterpret_cast<const uint8_t*>(e.sums.data());
      format::TensorInfo counts = sums;
      counts.name = name + std::string(kCountsSuffix);
      counts.ne = {1, e.n_mat(), 1, 1};
      counts.n_bytes = e.counts.size() * sizeof(float);
      counts.data = reinterpret_cast<const uint8_t*>(e.counts.data());
      f.tensors.push_back(std::move(sums));
      f.tensors.push_back(std::move(counts));
    }
    return format::write_gguf(path, f);
  }

  std::vector<char> out;
  auto put = [&out](const void* p, size_t n) { out.insert(out.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n); };
  auto put_i32 = [&put](int32_t v) { put(&v, sizeof(v)); };
  put_i32(static_cast<int32_t>(m.entries.size()));
  int32_t last_call = 0;
  for (const auto& [name, e] : m.entries) {
    const float first_count = e.counts.empty() ? 0.0f : e.counts[0];
    if (std::any_of(e.counts.begin(), e.counts.end(), [first_count](float c) { return c != first_count; }))
      return make_error("imatrix '{}': '{}' has matrices with different counts, which the legacy format cannot store; "
                        "write GGUF instead",
                        path, name);
    put_i32(static_cast<int32_t>(name.size()));
    put(name.data(), name.size());
    put_i32(e.n_call);
    put_i32(static_cast<int32_t>(e.sums.size()));
    const float count = e.counts.empty() ? 0.0f : e.counts[0];
    for (float s : e.sums) {
      const float v = count > 0.0f ? s / count * static_cast<float>(e.n_call) : s;
      put(&v, sizeof(v));
    }
    last_call = std::max(last_call, e.n_call);
  }
  put_i32(last_call);
  const std::string dataset = m.datasets.empty() ? std::string() : m.datasets.front();
  put_i32(static_cast<int32_t>(dataset.size()));
  put(dataset.data(), dataset.size());

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return make_error("imatrix '{}': cannot open for writing", path);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return make_error("imatrix '{}': write failed", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return make_error("imatrix '{}': cannot rename {} into place", path, tmp);
  return ok_status();
}

Result<std::optional<std::vector<float>>> imatrix_weights_for(const ImportanceMatrix& m, const format::TensorInfo& t,
                                                               const std::string& path) {
  auto it = m.entries.find(t.name);
  if (it == m.entries.end()) {
    const std::string gate = "ffn_gate";
    if (const size_t pos = t.name.find(gate); pos != std::string::npos) {
      std::string up = t.name;
      up.replace(pos, gate.size(), "ffn_up");
      it = m.entries.find(up);
    }
  }
  if (it == m.entries.end()) return std::optional<std::vector<float>>{};
  const int64_t expected = t.ne[0] * t.ne[2];
  if (static_cast<int64_t>(it->second.sums.size()) != expected)
    return make_error("imatrix '{}': entry '{}' has {} values, but tensor '{}' {} needs {} (columns x experts)", path,
                      it->first, it->second.sums.size(), t.name, t.shape_string(), expected);
  return std::optional<std::vector<float>>(it->second.means());
}

ImatrixCollector::ImatrixCollector(const format::ModelFile& file) {
  for (const format::TensorInfo& t : file.tensors)
    if (t.n_dims >= 2 && t.data != nullptr && t.name.rfind("blk.", 0) == 0)
      ranges_.push_back({t.data, t.data + t.n_bytes, &t});
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
}

void ImatrixCollector::observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tok) {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), w.data,
                             [](const uint8_t* p, const Range& r) { return p < r.begin; });
  if (it == ranges_.begin()) return;
  --it;
  if (w.data >= it->end) return;  // not a blk.* tensor of the file (token_embd, output, converted weights)
  const format::TensorInfo& t = *it->tensor;
  const auto matrix_bytes = static_cast<size_t>(t.n_bytes / static_cast<uint64_t>(t.ne[2] * t.ne[3]));
  const auto mat = static_cast<int64_t>(static_cast<size_t>(w.data - t.data) / matrix_bytes) % t.ne[2];
  add(t.name, x, n_tok, w.cols, mat, t.ne[2]);
}

void ImatrixCollector::add(const std::string& name, const float* x, int64_t n_tok, int64_t n_cols, int64_t mat,
                           int64_t n_mat) {
  ImatrixEntry& e = m_.entries[name];
  if (e.sums.empty()) {
    e.sums.assign(static_cast<size_t>(n_cols * n_mat), 0.0f);
    e.counts.assign(static_cast<size_t>(n_mat), 0.0f);
  }
  EDGELM_CHECK(e.n_mat() == n_mat && e.n_cols() == n_cols && mat >= 0 && mat < n_mat, "imatrix: '", name,
               "' seen with shapes ", e.n_cols(), "x", e.n_mat(), " and ", n_cols, "x", n_mat);
  float* sums = e.sums.data() + mat * n_cols;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* row = x + t * n_cols;
    for (int64_t c = 0; c < n_cols; ++c) sums[c] = std::fma(row[c], row[c], sums[c]);
  }
  e.counts[static_cast<size_t>(mat)] += static_cast<float>(n_tok);
  ++e.n_call;
}

}  // namespace edgelm::model
