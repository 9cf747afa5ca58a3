#include "oracle.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::media::test {

namespace {

std::string python() {
  const char* env = std::getenv("EDGELM_MEDIA_PYTHON");
  return env && *env ? env : EDGELM_MEDIA_PYTHON;
}

OracleRun run_oracle(const std::string& mode, const std::string& dir) {
  OracleRun run;
  run.dir = dir;
  const std::string py = python();
  const auto probe = edgelm::test::run_process({py, "-c", "import PIL, numpy"}, 60);
  if (probe.signaled || probe.exit_code != 0) {
    run.skip = fmt::format("python3-pil/python3-numpy not importable by {} (SKIPPED: {})", py, probe.err);
    return run;
  }
  const auto r = edgelm::test::run_process({py, "-W", "ignore", EDGELM_MEDIA_ORACLE, mode, dir}, 300);
  if (r.signaled || r.exit_code != 0) {
    run.error = fmt::format("pil_oracle.py {} failed (exit {}): {}", mode, r.exit_code, r.err);
    return run;
  }
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    if (!fields.empty()) run.cases.push_back(std::move(fields));
  }
  if (run.cases.empty()) run.error = "pil_oracle.py wrote an empty manifest";
  return run;
}

}  // namespace

const OracleRun& oracle(const std::string& mode) {
  static edgelm::test::TempDir root;
  static std::map<std::string, std::unique_ptr<OracleRun>> runs;
  auto& slot = runs[mode];
  if (!slot) slot = std::make_unique<OracleRun>(run_oracle(mode, root.file(mode)));
  return *slot;
}

OracleRun oracle_expect(const std::string& dir) { return run_oracle("expect", dir); }

std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = edgelm::test::read_file(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string compare_images(const Image& ours, int w, int h, std::span<const uint8_t> pil) {
  if (ours.width != w || ours.height != h) {
    return fmt::format("size {}x{}, PIL {}x{}", ours.width, ours.height, w, h);
  }
  if (pil.size() != static_cast<size_t>(w) * h * 3) return fmt::format("PIL file has {} bytes", pil.size());
  size_t n_diff = 0, first = 0;
  int max_diff = 0;
  for (size_t i = 0; i < pil.size(); ++i) {
    const int d = std::abs(int{ours.rgb[i]} - int{pil[i]});
    if (d && !n_diff++) first = i;
    max_diff = std::max(max_diff, d);
  }
  if (!n_diff) return "";
  const size_t px = first / 3;
  return fmt::format("{} of {} bytes differ (max {}); first at x={} y={} channel {}: ours {} PIL {}", n_diff,
                     pil.size(), max_diff, px % w, px / w, first % 3, ours.rgb[first], pil[first]);
}

}  // namespace edgelm::media::test
