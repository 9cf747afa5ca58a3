// The startup sweep of upload temporaries (serve/upload_dir.h) on real files: stale
// ".edgelm-upload-*" files go, everything else in and around the folder stays.
#include <gtest/gtest.h>

#include <filesystem>

#include "serve/upload_dir.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

namespace fs = std::filesystem;

TEST(UploadDir, RemovesOnlyStaleUploadTemporaries) {
  test::TempDir dir;
  const std::string d = dir.path();
  test::write_file(dir.file(".edgelm-upload-a1B2c3.gguf"), std::string(100000, 'x'));  // half an upload
  test::write_file(dir.file(".edgelm-upload-Zz9Yy8"), "no extension");
  test::write_file(dir.file("uploaded-0123456789ab.gguf"), "a kept upload");  // a final name
  test::write_file(dir.file("model.gguf"), "the served model");
  test::write_file(dir.file("edgelm-upload-notdot"), "not the prefix");
  fs::create_directory(dir.file(".edgelm-upload-folder"));
  test::write_file(dir.file(".edgelm-upload-folder/inside"), "a folder is not ours");
  fs::create_directory(dir.file("sub"));
  test::write_file(dir.file("sub/.edgelm-upload-deeper.bin"), "only the folder itself is swept");
  test::TempDir other;
  test::write_file(other.file("target.gguf"), "a link's target");
  fs::create_symlink(other.file("target.gguf"), dir.file(".edgelm-upload-link"));

  auto removed = remove_stale_uploads(d);
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  std::vector<std::string> got = *removed;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{dir.file(".edgelm-upload-Zz9Yy8"), dir.file(".edgelm-upload-a1B2c3.gguf")}));
  EXPECT_FALSE(fs::exists(dir.file(".edgelm-upload-a1B2c3.gguf")));
  EXPECT_FALSE(fs::exists(dir.file(".edgelm-upload-Zz9Yy8")));
  for (const char* kept : {"uploaded-0123456789ab.gguf", "model.gguf", "edgelm-upload-notdot",
                           ".edgelm-upload-folder/inside", "sub/.edgelm-upload-deeper.bin"})
    EXPECT_TRUE(fs::exists(dir.file(kept))) << kept;
  EXPECT_TRUE(fs::is_symlink(dir.file(".edgelm-upload-link")));
  EXPECT_EQ(test::read_file(other.file("target.gguf")), "a link's target");

  // A second sweep finds nothing; a folder that does not exist is nothing to clean.
  auto again = remove_stale_uploads(d);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  auto missing = remove_stale_uploads(dir.file("no-such-folder"));
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->empty());
}

TEST(UploadDir, FoldersAreTheUploadDirOrEachModelsFolder) {
  EXPECT_EQ(upload_dirs("/srv/uploads", {"/m/a.gguf", "/n/b.gguf"}), (std::vector<std::string>{"/srv/uploads"}));
  EXPECT_EQ(upload_dirs("", {"/m/a.gguf", "/m/./c.gguf", "/n/b.gguf"}), (std::vector<std::string>{"/m", "/n"}));
  const auto bare = upload_dirs("", {"model.gguf"});
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(fs::path(bare[0]), fs::current_path().lexically_normal());
}

}  // namespace
}  // namespace edgelm::serve
