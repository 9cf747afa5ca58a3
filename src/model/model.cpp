#include "model/model.h"

#include <cmath>

namespace edgelm::model {

Model::Model(format::ModelFile file, ModelConfig config, Weights weights)
    : file_(std::move(file)), config_(config), weights_(std::move(weights)) {
  if (weights_.rope_short != nullptr) {
    rope_ = RopeTable::longrope(config_, weights_.rope_short);
    rope_long_ = RopeTable::longrope(config_, weights_.rope_long);
  } else {
    rope_ = RopeTable(config_, weights_.rope_freqs);
  }
  if (config_.local_rope_base > 0.0f) rope_local_ = RopeTable::local(config_);
}

const RopeTable& Model::rope_for(int32_t layer, int32_t n_ctx) const {
  if (!rope_local_.empty() && config_.layer_is_local(layer)) return rope_local_;
  if (!rope_long_.empty() && n_ctx > config_.longrope_orig_ctx) return rope_long_;
  return rope_;
}

float Model::attn_scale() const {
  return config_.attn_scale > 0.0f ? config_.attn_scale : 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
}

void Model::cap_logits(float* logits, int64_t n) const {
  const float cap = config_.final_softcap;
  if (cap <= 0.0f) return;
  for (int64_t i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

Result<std::unique_ptr<Model>> Model::mtp_head() const {
  const MtpWeights& m = weights_.mtp;
  if (!m.present)
    return make_error("the model file has no MTP layer ({}.nextn_predict_layers is 0 or absent)", config_.arch->name);
  ModelConfig c = config_;
  c.n_layer = 1;
  c.n_nextn = 0;
  c.deltanet.interval = 1;  // layer 0 attends: no recurrent layer, one K/V layer
  Weights w;
  w.token_embd = weights_.token_embd;
  w.output_norm = m.shared_head_norm;
  w.output = m.output;
  w.rope_freqs = weights_.rope_freqs;
  w.layers.push_back(m.layer);
  return std::unique_ptr<Model>(new Model(format::ModelFile{}, c, std::move(w)));
}

Result<std::unique_ptr<Model>> Model::load(format::ModelFile file) {
  EDGELM_TRY(ModelConfig config, config_from_metadata(file.metadata));
  EDGELM_TRY(Weights weights, load_weights(file, config));
  return std::unique_ptr<Model>(new Model(std::move(file), config, std::move(weights)));
}

}  // namespace edgelm::model
