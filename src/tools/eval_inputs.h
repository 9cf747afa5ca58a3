// The inputs `edgelm eval` and `edgelm optimize` measure quality on: the built-in text and
// prompts (plain prose in the style of children's stories, written for this tool: enough to
// rank quantizations of a small story model in seconds, not a benchmark of record) and the
// readers of --text / --prompts files.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "engine/loaded_model.h"
#include "format/model_file.h"

namespace edgelm::tools {

// A few hundred tokens for a Llama vocabulary.
const char* eval_default_text();
// Four story openings.
const std::vector<std::string>& eval_default_prompts();

Result<std::string> read_text_file(const std::string& path);
// One prompt per non-blank line; "\n" in a line stands for a newline. Errors: unreadable, none.
Result<std::vector<std::string>> read_eval_prompts(const std::string& path);

// The type holding most of a model file's weight bytes ("f16", "q4_0"; "?" without tensors), as
// the label of a model.
std::string dominant_type(const format::ModelFile& f);
std::string dominant_type(const engine::LoadedModel& lm);

}  // namespace edgelm::tools
