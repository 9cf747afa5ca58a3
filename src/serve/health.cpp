#include "serve/health.h"

namespace edgelm::serve {

Health assess_health(const std::vector<std::unique_ptr<ServedModel>>& models, bool draining) {
  Health h;
  std::string not_ready;  // the first model's state that is not ready
  bool saturated = false;
  for (const auto& m : models) {
    ModelHealth mh;
    mh.name = m->spec.name;
    mh.tier = m->spec.tier;
    const ServiceStats st = m->service->stats();
    if (st.state != ServiceState::ready) {
      mh.state = std::string(service_state_name(st.state));
      if (not_ready.empty()) not_ready = mh.state;
    } else if (st.n_running + st.n_waiting >= m->service->capacity()) {  // a new request would get 429
      mh.state = "saturated";
      saturated = true;
    } else if (m->profiling.load()) {
      mh.state = "profiling";
    } else {
      mh.state = "ready";
    }
    if (m->profiling.load()) {
      h.profiling = true;
      h.profile_pieces_done += m->profile_pieces_done.load();
      h.profile_pieces_planned += m->profile_pieces_planned.load();
    }
    h.models.push_back(std::move(mh));
  }
  if (draining) not_ready = "draining";
  if (!not_ready.empty()) {
    h.http_status = 503;
    h.status = h.state = not_ready;
    return h;
  }
  h.http_status = 200;
  h.status = "ok";
  h.state = saturated ? "saturated" : h.profiling ? "profiling" : "ready";
  return h;
}

nlohmann::json health_json(const Health& h, bool list_models) {
  nlohmann::json j = {{"status", h.status}, {"state", h.state}};
  if (h.profiling)
    j["profile"] = {{"pieces_done", h.profile_pieces_done}, {"pieces_planned", h.profile_pieces_planned}};
  if (list_models) {
    nlohmann::json models = nlohmann::json::array();
    for (const ModelHealth& m : h.models)
      models.push_back({{"name", m.name}, {"tier", tier_name(m.tier)}, {"state", m.state}});
    j["models"] = std::move(models);
  }
  return j;
}

}  // namespace edgelm::serve
