// Draft-model setup for speculative decoding, shared by the CLI tools and `edgelm serve`.
//
// Job: turn the user's speculation settings (DraftSpec: --spec, --draft, --draft-model, --draft-quant,
// --draft-max, --draft-min, or the serve config keys of the same names) into SpecOptions,
// loading a draft model from a file or quantizing the target in memory as the draft.
//
// Invariants:
//  - A DraftModel owns the draft model and its runner; SpecOptions::draft_model points into it,
//    so it must outlive every engine built from those options (declare it before the engine).
//  - --spec ngram, --draft-model and --draft-quant exclude each other; the draft's vocabulary
//    equals the target's. Error messages name the flags.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/speculative.h"
#include "engine/step_model.h"
#include "format/model_file.h"
#include "model/gemma4_assistant.h"
#include "model/model.h"

namespace edgelm::engine {

// Speculative decoding settings, as typed.
struct DraftSpec {
  std::string spec = "off";  // --spec off|ngram[:N]|mtp
  std::string draft_model;   // --draft-model PATH
  std::string draft_quant;   // --draft-quant TYPE: the target quantized in memory as the draft
  int draft_max = 8;
  int draft_min = 0;
  std::string draft;  // --draft mtp: the target's own MTP head (engine/mtp_drafter.h); same as --spec mtp
};

// A draft model and its runner, or a Gemma 4 assistant; must outlive the engine that uses it.
struct DraftModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<model::Gemma4Assistant> assistant;
};

// Fills spec from ds: loads ds.draft_model (a llama2.c checkpoint takes tokenizer_path) or
// quantizes `target` in memory (ds.draft_quant) into `draft`, whose runner uses `pool`. A draft
// file is loaded with `load` (no_mmap: read into memory, like the target). A --draft-model file
// of architecture gemma4_mtp (a Gemma 4 assistant, model/gemma4_assistant.h) is detected and
// drafts in SpecMode::assistant for a gemma4 target (engine/assistant_drafter.h), on `pool`.
Status configure_speculation(const DraftSpec& ds, const model::Model& target, const std::string& tokenizer_path,
                             ThreadPool& pool, SpecOptions& spec, DraftModel& draft,
                             const format::LoadOptions& load = {});

}  // namespace edgelm::engine
