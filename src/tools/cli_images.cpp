// Images on the command line (see cli_images.h).
#include "tools/cli_images.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <sstream>

namespace edgelm::tools {

Result<std::unique_ptr<serve::ImageInput>> open_cli_images(const std::string& mmproj, const engine::LoadedModel& lm,
                                                           int threads, int cache_entries, int max_image_tokens) {
  serve::ImageInputOptions io;
  io.mmproj_path = mmproj;
  io.cache_entries = cache_entries;
  io.threads = std::max(1, threads);
  io.max_images = 1 << 20;
  io.max_image_tokens = max_image_tokens;
  EDGELM_TRY(std::unique_ptr<serve::ImageInput> in, serve::ImageInput::open(io));
  EDGELM_TRY_STATUS(in->check_model(lm.model->config()));
  if (Status st = in->check_vocab(lm.tokenizer->vocab()); !st.ok()) return make_error("--mmproj: {}", st.error().message);
  return Result<std::unique_ptr<serve::ImageInput>>(std::move(in));
}

Result<std::string> read_image_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error("--image '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error("--image '{}' is not a regular file", path);
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("--image '{}' cannot be read", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  if (bytes.empty()) return make_error("--image '{}' is empty", path);
  return bytes;
}

Result<std::vector<serve::EncodedImage>> encode_image_files(serve::ImageInput& in,
                                                            const std::vector<std::string>& paths) {
  std::vector<std::string> bytes;
  for (const std::string& p : paths) {
    EDGELM_TRY(std::string b, read_image_file(p));
    bytes.push_back(std::move(b));
  }
  size_t failed = 0;
  auto out = in.encode_all_bytes(bytes, &failed);  // one encoder submission: batched
  if (!out.ok()) return make_error("--image '{}': {}", paths[failed], out.error().message);
  return out;
}

Status set_image_prompt(serve::ImageInput& in, const engine::LoadedModel& lm, const std::string& prompt,
                        const std::vector<serve::EncodedImage>& images, engine::GenerateOptions& gen) {
  std::string text;
  for (size_t i = 0; i < images.size(); ++i) text += serve::kImageMarker;
  text += prompt;
  EDGELM_TRY(gen.prompt_tokens, in.tokenize(*lm.tokenizer, text, images, /*add_special=*/true));
  EDGELM_TRY(gen.images, in.locate(gen.prompt_tokens, lm.tokenizer->vocab(), images));
  return ok_status();
}

}  // namespace edgelm::tools
