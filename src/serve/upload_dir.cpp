#include "serve/upload_dir.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/log.h"

namespace edgelm::serve {

namespace fs = std::filesystem;

std::vector<std::string> upload_dirs(const std::string& upload_dir, const std::vector<std::string>& model_paths) {
  std::vector<std::string> out;
  auto add = [&out](fs::path p) {
    if (p.empty()) {
      std::error_code ec;
      p = fs::current_path(ec);
      if (ec) return;
    }
    p = p.lexically_normal();
    if (!p.has_filename() && p != p.root_path()) p = p.parent_path();  // "/m/." -> "/m/" -> "/m"
    std::string s = p.string();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  };
  if (!upload_dir.empty()) {
    add(upload_dir);
    return out;
  }
  for (const std::string& m : model_paths) add(fs::path(m).parent_path());
  return out;
}

Result<std::vector<std::string>> remove_stale_uploads(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return removed;
  fs::directory_iterator it(dir, ec);
  if (ec) return make_error("cannot list the upload folder '{}': {}", dir, ec.message());
  std::string failed;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.filename().string().rfind(kUploadTempPrefix, 0) != 0) continue;
    // symlink_status: a link named like a temporary is not ours to follow or delete.
    if (!fs::is_regular_file(it->symlink_status(ec))) continue;
    const uintmax_t size = fs::file_size(p, ec);
    if (ec || !fs::remove(p, ec) || ec) {
      failed = fmt::format("cannot remove the stale upload '{}': {}", p.string(), ec ? ec.message() : "gone");
      continue;
    }
    EDGELM_LOG_WARN("removed '{}' ({} bytes): an upload to POST /reload left unfinished by a server that stopped",
                    p.string(), size);
    removed.push_back(p.string());
  }
  if (ec) return make_error("cannot list the upload folder '{}': {}", dir, ec.message());
  if (!failed.empty()) return make_error("{}", failed);
  return removed;
}

}  // namespace edgelm::serve
