// Locating the shared test data (../shared: models, vocabularies, goldens) and scratch space.
#pragma once

#include <string>
#include <string_view>

namespace edgelm::test {

// Path of `relative` inside the shared data folder: $EDGELM_TEST_DATA if set, else the folder
// configured at build time (default: ../shared beside the checkout).
std::string shared_path(std::string_view relative);

// A fresh directory under the system temp dir, removed with its contents when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// Whole file contents (binary-safe); empty on error.
std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view contents);

}  // namespace edgelm::test
