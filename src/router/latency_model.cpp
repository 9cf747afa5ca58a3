#include "router/latency_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace edgelm::router {
namespace {

constexpr int kProfileVersion = 1;

// Solves the n×n system A·x = y (row-major A) by Gaussian elimination with partial pivoting.
// False when A is singular (to relative precision).
template <size_t N>
bool solve(std::array<std::array<double, N>, N> a, std::array<double, N> y, std::array<double, N>& x) {
  double scale = 0.0;
  for (const auto& row : a)
    for (double v : row) scale = std::max(scale, std::fabs(v));
  if (scale == 0.0) return false;
  for (size_t col = 0; col < N; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < N; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    if (std::fabs(a[pivot][col]) < 1e-12 * scale) return false;
    std::swap(a[col], a[pivot]);
    std::swap(y[col], y[pivot]);
    for (size_t r = col + 1; r < N; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c < N; ++c) a[r][c] -= f * a[col][c];
      y[r] -= f * y[col];
    }
  }
  for (size_t i = N; i-- > 0;) {
    double s = y[i];
    for (size_t c = i + 1; c < N; ++c) s -= a[i][c] * x[c];
    x[i] = s / a[i][i];
  }
  return true;
}

// Weighted least squares (weights 1/y²) of y on the first N of the features (each row of
// features holds them, scaled to O(1)).
template <size_t N>
bool weighted_lsq(const std::vector<std::array<double, 3>>& features, const std::vector<double>& y,
                  std::array<double, N>& coef) {
  std::array<std::array<double, N>, N> ata{};
  std::array<double, N> aty{};
  for (size_t k = 0; k < y.size(); ++k) {
    const double w = 1.0 / (y[k] * y[k]);
    for (size_t i = 0; i < N; ++i) {
      aty[i] += w * features[k][i] * y[k];
      for (size_t j = 0; j < N; ++j) ata[i][j] += w * features[k][i] * features[k][j];
    }
  }
  return solve<N>(ata, aty, coef);
}

double rel_err(double predicted, double measured) { return std::fabs(predicted - measured) / measured; }

}  // namespace

int32_t LatencyModel::padded(int32_t n_input) const {
  if (n_input <= 0) return 0;
  const int32_t g = std::max<int32_t>(1, padding);
  return (n_input + g - 1) / g * g;
}

double LatencyModel::prefill_ms(int32_t n_input) const {
  const double p = padded(n_input);
  const double v = prefill_a * p * p + prefill_b * p + prefill_c;
  return std::isfinite(v) ? std::max(0.0, v) : 0.0;
}

double LatencyModel::decode_ms(double context) const {
  const double v = decode_t + decode_s * std::max(0.0, context);
  return std::isfinite(v) ? std::max(0.0, v) : 0.0;
}

double LatencyModel::batch_factor(int32_t batch) const {
  if (batch <= 1 || batch_factors.empty()) return 1.0;
  double b0 = 1.0, f0 = 1.0;
  for (const auto& [b, f] : batch_factors) {
    if (batch <= b) return f0 + (f - f0) * (batch - b0) / (b - b0);
    b0 = b;
    f0 = f;
  }
  return 1.0 + (f0 - 1.0) * (batch - 1.0) / (b0 - 1.0);
}

double LatencyModel::predict_ms(int32_t n_input, int32_t n_output, int32_t context) const {
  const double o = std::max(0, n_output);
  const double c0 = static_cast<double>(std::max(0, context)) + std::max(0, n_input);
  const double decode = o * decode_t + decode_s * (o * c0 + o * (o - 1.0) / 2.0);
  const double v = prefill_ms(n_input) + (std::isfinite(decode) ? std::max(0.0, decode) : 0.0);
  return std::isfinite(v) ? v : 0.0;
}

int32_t LatencyModel::max_output_within(double budget_ms, int32_t n_input, int32_t limit, int32_t context) const {
  if (limit <= 0 || predict_ms(n_input, 1, context) > budget_ms) return 0;
  if (predict_ms(n_input, limit, context) <= budget_ms) return limit;
  int32_t lo = 1, hi = limit;  // predict(lo) fits, predict(hi) does not
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    (predict_ms(n_input, mid, context) <= budget_ms ? lo : hi) = mid;
  }
  return lo;
}

bool LatencyModel::valid() const {
  return (prefill_a > 0 || prefill_b > 0 || prefill_c > 0) && (decode_t > 0 || decode_s > 0);
}

Result<LatencyModel> fit_prefill(const std::vector<PrefillSample>& samples, int32_t padding) {
  if (samples.empty()) return make_error("no prefill samples to fit");
  if (padding < 1) return make_error("padding granularity must be >= 1, got {}", padding);
  LatencyModel m;
  m.padding = padding;
  double scale = 1.0;
  std::set<int32_t> distinct;
  for (const auto& s : samples) {
    if (!(s.ms > 0.0) || !std::isfinite(s.ms) || s.n_input <= 0)
      return make_error("prefill sample ({} tokens, {} ms) is not positive", s.n_input, s.ms);
    distinct.insert(m.padded(s.n_input));
    scale = std::max(scale, static_cast<double>(m.padded(s.n_input)));
  }
  std::vector<std::array<double, 3>> f;  // [1, x, x²], x = P / scale
  std::vector<double> y;
  for (const auto& s : samples) {
    const double x = m.padded(s.n_input) / scale;
    f.push_back({1.0, x, x * x});
    y.push_back(s.ms);
  }
  if (distinct.size() >= 3) {
    std::array<double, 3> c{};
    if (weighted_lsq<3>(f, y, c) && c[2] >= 0.0 && c[0] + c[1] + c[2] > 0.0) {
      m.prefill_c = c[0];
      m.prefill_b = c[1] / scale;
      m.prefill_a = c[2] / (scale * scale);
    }
  }
  if (m.prefill_a == 0.0 && distinct.size() >= 2) {  // linear: quadratic failed or not enough lengths
    std::array<double, 2> c{};
    if (weighted_lsq<2>(f, y, c) && c[1] >= 0.0) {
      m.prefill_c = c[0];
      m.prefill_b = c[1] / scale;
    }
  }
  if (m.prefill_a == 0.0 && m.prefill_b == 0.0) {  // constant: the weighted mean
    std::array<double, 1> c{};
    if (!weighted_lsq<1>(f, y, c)) return make_error("prefill fit is singular");
    m.prefill_c = c[0];
  }
  m.n_prefill_samples = static_cast<int32_t>(samples.size());
  return m;
}

Result<LatencyModel> fit_decode(const std::vector<DecodeSample>& samples) {
  if (samples.empty()) return make_error("no decode samples to fit");
  double scale = 1.0;
  std::set<int32_t> distinct;
  for (const auto& s : samples) {
    if (!(s.ms > 0.0) || !std::isfinite(s.ms) || s.context < 0)
      return make_error("decode sample (context {}, {} ms) is not positive", s.context, s.ms);
    distinct.insert(s.context);
    scale = std::max(scale, static_cast<double>(s.context));
  }
  std::vector<std::array<double, 3>> f;
  std::vector<double> y;
  for (const auto& s : samples) {
    f.push_back({1.0, s.context / scale, 0.0});
    y.push_back(s.ms);
  }
  LatencyModel m;
  std::array<double, 2> c{};
  if (distinct.size() >= 2 && weighted_lsq<2>(f, y, c) && c[1] >= 0.0 && c[0] > 0.0) {
    m.decode_t = c[0];
    m.decode_s = c[1] / scale;
  } else {
    std::array<double, 1> c1{};
    if (!weighted_lsq<1>(f, y, c1)) return make_error("decode fit is singular");
    m.decode_t = c1[0];
  }
  m.n_decode_samples = static_cast<int32_t>(samples.size());
  return m;
}

double prefill_rms_relative_error(const LatencyModel& m, const std::vector<PrefillSample>& samples) {
  if (samples.empty()) return 0.0;
  double s2 = 0.0;
  for (const auto& s : samples) {
    const double r = rel_err(m.prefill_ms(s.n_input), s.ms);
    s2 += r * r;
  }
  return std::sqrt(s2 / static_cast<double>(samples.size()));
}

double mean_relative_error(const LatencyModel& m, const std::vector<PrefillSample>& samples) {
  if (samples.empty()) return 0.0;
  double sum = 0.0;
  for (const auto& s : samples) sum += rel_err(m.prefill_ms(s.n_input), s.ms);
  return sum / static_cast<double>(samples.size());
}

double mean_relative_error(const LatencyModel& m, const std::vector<DecodeSample>& samples) {
  if (samples.empty()) return 0.0;
  double sum = 0.0;
  for (const auto& s : samples) sum += rel_err(m.decode_ms(s.context), s.ms);
  return sum / static_cast<double>(samples.size());
}

namespace {

// Splits samples sorted by `key` into training and held-out sets (every k-th held out).
template <typename S, typename Key>
void split(std::vector<S> v, int32_t every, Key key, std::vector<S>& train, std::vector<S>& held) {
  std::stable_sort(v.begin(), v.end(), [&](const S& a, const S& b) { return key(a) < key(b); });
  for (size_t i = 0; i < v.size(); ++i)
    (every > 0 && i % static_cast<size_t>(every) == static_cast<size_t>(every / 2) ? held : train).push_back(v[i]);
}

}  // namespace

Result<LatencyModel> fit_latency_model(const std::vector<PrefillSample>& prefill,
                                       const std::vector<DecodeSample>& decode, const FitOptions& opts) {
  std::vector<PrefillSample> p_train, p_held;
  std::vector<DecodeSample> d_train, d_held;
  split(
      prefill, opts.holdout_every, [](const PrefillSample& s) { return s.n_input; }, p_train, p_held);
  split(
      decode, opts.holdout_every, [](const DecodeSample& s) { return s.context; }, d_train, d_held);
  if (p_train.size() < 3) return make_error("need at least 3 prefill samples to fit, got {}", p_train.size());
  if (d_train.size() < 2) return make_error("need at least 2 decode samples to fit, got {}", d_train.size());

  LatencyModel best;
  if (opts.padding > 0) {
    EDGELM_TRY(best, fit_prefill(p_train, opts.padding));
  } else {
    if (opts.padding_candidates.empty()) return make_error("no padding candidates to choose from");
    std::vector<std::pair<LatencyModel, double>> fits;
    double min_err = INFINITY;
    for (const int32_t g : opts.padding_candidates) {
      EDGELM_TRY(LatencyModel m, fit_prefill(p_train, g));
      const double e = prefill_rms_relative_error(m, p_train);
      min_err = std::min(min_err, e);
      fits.emplace_back(std::move(m), e);
    }
    std::sort(fits.begin(), fits.end(), [](const auto& a, const auto& b) { return a.first.padding < b.first.padding; });
    for (auto& [m, e] : fits) {
      if (e <= min_err * 1.1 + 1e-9) {
        best = m;
        break;
      }
    }
  }
  EDGELM_TRY(const LatencyModel d, fit_decode(d_train));
  best.decode_t = d.decode_t;
  best.decode_s = d.decode_s;
  best.n_decode_samples = d.n_decode_samples;
  best.held_out_prefill_error = mean_relative_error(best, p_held);
  best.held_out_decode_error = mean_relative_error(best, d_held);
  return best;
}

nlohmann::json to_json(const LatencyModel& m) {
  return {{"version", kProfileVersion},
          {"padding", m.padding},
          {"prefill", {{"a_ms_per_token2", m.prefill_a}, {"b_ms_per_token", m.prefill_b}, {"c_ms", m.prefill_c}}},
          {"decode",
           {{"t_ms_per_token", m.decode_t}, {"context_slope_ms", m.decode_s}, {"batch_factors", m.batch_factors}}},
          {"held_out_error", {{"prefill", m.held_out_prefill_error}, {"decode", m.held_out_decode_error}}},
          {"samples", {{"prefill", m.n_prefill_samples}, {"decode", m.n_decode_samples}}},
          {"source", m.source}};
}

Result<LatencyModel> latency_model_from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object()) return make_error("latency profile: not a JSON object");
    const int version = j.value("version", 0);
    if (version != kProfileVersion)
      return make_error("latency profile: version {} (this build reads {})", version, kProfileVersion);
    LatencyModel m;
    m.padding = j.at("padding").get<int32_t>();
    const auto& p = j.at("prefill");
    m.prefill_a = p.at("a_ms_per_token2").get<double>();
    m.prefill_b = p.at("b_ms_per_token").get<double>();
    m.prefill_c = p.at("c_ms").get<double>();
    const auto& d = j.at("decode");
    m.decode_t = d.at("t_ms_per_token").get<double>();
    m.decode_s = d.value("context_slope_ms", 0.0);
    if (d.contains("batch_factors")) {
      m.batch_factors = d["batch_factors"].get<std::vector<std::pair<int32_t, double>>>();
      int32_t prev = 1;
      for (const auto& [b, f] : m.batch_factors) {
        if (b <= prev || !(f > 0) || !std::isfinite(f))
          return make_error("latency profile: batch_factors need increasing batch sizes >= 2 and factors > 0");
        prev = b;
      }
    }
    if (j.contains("held_out_error")) {
      m.held_out_prefill_error = j["held_out_error"].value("prefill", 0.0);
      m.held_out_decode_error = j["held_out_error"].value("decode", 0.0);
    }
    if (j.contains("samples")) {
      m.n_prefill_samples = j["samples"].value("prefill", 0);
      m.n_decode_samples = j["samples"].value("decode", 0);
    }
    m.source = j.value("source", "");
    if (m.padding < 1) return make_error("latency profile: padding must be >= 1, got {}", m.padding);
    for (const double v : {m.prefill_a, m.prefill_b, m.prefill_c, m.decode_t, m.decode_s})
      if (!std::isfinite(v)) return make_error("latency profile: a coefficient is not finite");
    if (m.prefill_a < 0 || m.decode_t <= 0 || m.decode_s < 0)
      return make_error("latency profile: needs prefill a >= 0, decode t > 0 and context slope >= 0");
    return m;
  } catch (const nlohmann::json::exception& e) {
    return make_error("latency profile: {}", e.what());
  }
}

Status save_latency_model(const LatencyModel& m, const std::string& path) {
  std::ofstream out(path);
  if (!out) return make_error("cannot write latency profile {}", path);
  out << to_json(m).dump(2) << "\n";
  if (!out) return make_error("cannot write latency profile {}", path);
  return ok_status();
}

Result<LatencyModel> load_latency_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read latency profile {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return make_error("latency profile {}: not valid JSON", path);
  auto m = latency_model_from_json(j);
  if (!m.ok()) return make_error("{}: {}", path, m.error().message);
  return m;
}

OnlineLatencyModel::OnlineLatencyModel(LatencyModel base, double alpha)
    : base_(std::move(base)), alpha_(std::clamp(alpha, 1e-4, 1.0)) {}

namespace {
void update_factor(double& factor, double alpha, double predicted, double observed) {
  if (!(predicted > 0.0) || !(observed > 0.0) || !std::isfinite(observed)) return;
  const double ratio = std::clamp(observed / predicted, 0.125, 8.0);
  factor = std::clamp((1.0 - alpha) * factor + alpha * ratio, 0.125, 8.0);
}
}  // namespace

// The k-th observation of a phase weighs max(alpha, 1/(k+1)): the first ones average with the
// profile (which counts as one), so a profile taken under different load is corrected within a
// few requests; later ones move the factor as an EWMA.
void OnlineLatencyModel::observe_prefill(int32_t n_input, double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  ++n_prefill_;
  update_factor(prefill_factor_, std::max(alpha_, 1.0 / static_cast<double>(n_prefill_ + 1)), base_.prefill_ms(n_input),
                ms);
  ++n_obs_;
}

int OnlineLatencyModel::batch_bucket(int32_t batch) {
  int b = 0;
  for (int32_t limit = 1; b < kBatchBuckets - 1 && batch > limit; limit *= 2) ++b;
  return b;
}

void OnlineLatencyModel::observe_decode(int32_t context, double ms_per_token, int32_t batch) {
  std::lock_guard<std::mutex> lock(mu_);
  const int b = batch_bucket(batch);
  if (n_decode_[b] == 0) decode_factor_[b] = decode_factor_locked(batch);  // start from what it predicted
  ++n_decode_[b];
  update_factor(decode_factor_[b], std::max(alpha_, 1.0 / static_cast<double>(n_decode_[b] + 1)),
                base_.decode_ms(context) * base_.batch_factor(batch), ms_per_token);
  ++n_obs_;
}

double OnlineLatencyModel::decode_factor_locked(int32_t batch) const {
  for (int b = batch_bucket(batch); b >= 0; --b)
    if (n_decode_[b] > 0) return decode_factor_[b];
  return 1.0;
}

LatencyModel OnlineLatencyModel::current(int32_t batch) const {
  std::lock_guard<std::mutex> lock(mu_);
  LatencyModel m = base_;
  m.prefill_a *= prefill_factor_;
  m.prefill_b *= prefill_factor_;
  m.prefill_c *= prefill_factor_;
  const double d = decode_factor_locked(batch) * base_.batch_factor(batch);
  m.decode_t *= d;
  m.decode_s *= d;
  return m;
}

double OnlineLatencyModel::prefill_factor() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefill_factor_;
}

double OnlineLatencyModel::decode_factor(int32_t batch) const {
  std::lock_guard<std::mutex> lock(mu_);
  return decode_factor_locked(batch);
}

int64_t OnlineLatencyModel::n_observations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_obs_;
}

}  // namespace edgelm::router
