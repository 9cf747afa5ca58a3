// The models one server serves: `--model name=PATH,tier=small|medium|large[,...]` (repeatable)
// or the `models:` list of the config file, each becoming its own EngineService; the router
// (router.h) picks among them per request.
//
// Spec syntax: "NAME=PATH" first, then comma-separated keys:
//   tier=small|medium|large   the router's tier (default small)
//   tokenizer=PATH            llama2.c tokenizer.bin for .bin checkpoints
//   profile=PATH              latency profile (edgelm profile -o); when the file does not exist,
//                             the startup profile is written there
//   dyn_temp=MIN:START:FULL   dynamic temperature for this tier (sample/dynamic_temperature.h)
//
// Invariants: parse errors name the spec and the offending key; names are unique within a
// server (model_specs checks); a plain path (no '=' before the first ',') is not a spec.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sample/dynamic_temperature.h"
#include "serve/config.h"
#include "serve/router_api.h"

namespace edgelm::serve {

struct ModelSpec {
  std::string name;
  std::string path;
  std::string tokenizer_path;
  std::string profile_path;
  Tier tier = Tier::small;
  std::optional<sample::DynamicTemperature> dyn_temp;  // nullopt: the request's temperature as is
};

// True when `text` is written as a spec ("name=PATH,..."), not a plain model path.
bool looks_like_model_spec(std::string_view text);
Result<ModelSpec> parse_model_spec(std::string_view text);

// The server's models: cfg.models when set, else the single model_path (named model_name,
// tier small). Errors: a bad spec, duplicate names, both model_path and models set.
Result<std::vector<ModelSpec>> model_specs(const ServeConfig& cfg);

}  // namespace edgelm::serve
