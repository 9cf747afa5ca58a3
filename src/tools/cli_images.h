// Images on the command line (`edgelm run --image`, `edgelm bench --image`): image files read
// and encoded by the serve path's ImageInput (serve/image_input.h) with the model's --mmproj
// encoder, and a prompt whose images come before its text, as the chat path places them.
//
// Invariants: every failure is an error naming the flag and the file (missing, unreadable,
// empty, not a decodable image, an encoder that does not fit the model); the encoder cache is
// off unless asked for, so each encode is measured cold.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "serve/image_input.h"

namespace edgelm::tools {

// The encoder of --mmproj, checked against the loaded model (architecture, width, vocabulary);
// max_image_tokens: ImageInputOptions::max_image_tokens (qwen3vl; the prompt batch an image must fit).
Result<std::unique_ptr<serve::ImageInput>> open_cli_images(const std::string& mmproj, const engine::LoadedModel& lm,
                                                           int threads, int cache_entries = 0,
                                                           int max_image_tokens = 0);

// The bytes of --image PATH. Errors: missing or unreadable, a folder, empty.
Result<std::string> read_image_file(const std::string& path);

// Reads each file in order, then encodes them all in one encoder submission (batched,
// image_input.h). Errors name the file.
Result<std::vector<serve::EncodedImage>> encode_image_files(serve::ImageInput& in, const std::vector<std::string>& paths);

// gen.prompt_tokens and gen.images for the images followed by `prompt` (BOS first).
Status set_image_prompt(serve::ImageInput& in, const engine::LoadedModel& lm, const std::string& prompt,
                        const std::vector<serve::EncodedImage>& images, engine::GenerateOptions& gen);

}  // namespace edgelm::tools
