#include "model/model.h"

namespace edgelm::model {

Result<std::unique_ptr<Model>> Model::load(format::ModelFile file) {
  EDGELM_TRY(ModelConfig config, config_from_metadata(file.metadata));
  EDGELM_TRY(Weights weights, load_weights(file, config));
  return std::unique_ptr<Model>(new Model(std::move(file), config, std::move(weights)));
}

}  // namespace edgelm::model
