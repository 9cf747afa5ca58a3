#include "engine/draft_model.h"

#include <utility>

#include "format/model_file.h"
#include "model/quantize.h"

namespace edgelm::engine {

Status configure_speculation(const DraftSpec& ds, const model::Model& target, const std::string& tokenizer_path,
                             ThreadPool& pool, SpecOptions& spec, DraftModel& draft, const format::LoadOptions& load) {
  spec.draft_max = ds.draft_max;
  spec.draft_min = ds.draft_min;
  EDGELM_TRY_STATUS(parse_spec_mode(ds.spec, spec));
  if (!ds.draft.empty() && ds.draft != "mtp")
    return make_error("--draft: '{}' is not a built-in draft source (mtp; a draft model file is --draft-model PATH)",
                      ds.draft);
  if (ds.draft == "mtp") {
    if (spec.mode == SpecMode::ngram) return make_error("--spec ngram and --draft mtp exclude each other");
    spec.mode = SpecMode::mtp;
  }
  if (spec.mode == SpecMode::mtp) {
    if (!ds.draft_model.empty() || !ds.draft_quant.empty())
      return make_error("--draft mtp and --draft-model / --draft-quant exclude each other");
    spec.mtp_model = &target;
    spec.mtp_pool = &pool;
    return validate(spec);
  }
  if (!ds.draft_model.empty() && !ds.draft_quant.empty())
    return make_error("--draft-model and --draft-quant exclude each other");
  if ((!ds.draft_model.empty() || !ds.draft_quant.empty()) && spec.mode == SpecMode::ngram)
    return make_error("--spec ngram and a draft model exclude each other");
  if (!ds.draft_model.empty()) {
    auto file = format::open_model_file(ds.draft_model, tokenizer_path, load);
    if (!file.ok()) return make_error("draft model '{}': {}", ds.draft_model, file.error().message);
    if (model::is_gemma4_assistant(file.value())) {
      auto a = model::Gemma4Assistant::load(std::move(file).value());
      if (!a.ok()) return make_error("draft model '{}': {}", ds.draft_model, a.error().message);
      if (auto st = a.value()->check_target(target); !st.ok())
        return make_error("draft model '{}': {}", ds.draft_model, st.error().message);
      draft.assistant = std::move(a).value();
      spec.mode = SpecMode::assistant;
      spec.assistant = draft.assistant.get();
      spec.mtp_model = &target;
      spec.mtp_pool = &pool;
      return validate(spec);
    }
    auto m = model::Model::load(std::move(file).value());
    if (!m.ok()) return make_error("draft model '{}': {}", ds.draft_model, m.error().message);
    draft.model = std::move(m).value();
  } else if (!ds.draft_quant.empty()) {
    EDGELM_TRY(const model::QuantPreset preset, model::quant_preset_from_name(ds.draft_quant));
    EDGELM_TRY(format::ModelFile file, model::quantize_model(target.file(), preset, pool));
    auto m = model::Model::load(std::move(file));
    if (!m.ok()) return make_error("--draft-quant {}: {}", ds.draft_quant, m.error().message);
    draft.model = std::move(m).value();
  }
  if (draft.model) {
    if (draft.model->config().n_vocab != target.config().n_vocab)
      return make_error("the draft model's vocabulary has {} tokens, the target's {}", draft.model->config().n_vocab,
                        target.config().n_vocab);
    draft.runner = std::make_unique<ModelRunner>(*draft.model, pool);
    spec.mode = SpecMode::draft;
    spec.draft_model = draft.runner.get();
  }
  if (spec.mode != SpecMode::off) EDGELM_TRY_STATUS(validate(spec));
  return ok_status();
}

}  // namespace edgelm::engine
