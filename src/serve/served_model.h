// One model a server serves (model_spec.h) with what routing needs of it at run time: its
// engine service and its latency profile, refined by live timings.
//
// Invariants: `service` outlives the ServedModel; latency() is null until a profile was loaded
// or measured (the router then assumes the tier fits any budget); set_latency may be called
// from any thread (the startup profile runs beside serving).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "serve/engine_service.h"
#include "serve/router_api.h"
#include "serve/model_spec.h"

namespace edgelm::serve {

struct ServedModel {
  ModelSpec spec;
  EngineService* service = nullptr;
  // The startup profile (model_profiles.h) is pending or running on its engine thread, and its
  // pieces done of those planned (planned is 0 until the plan is made after the warm-up).
  std::atomic<bool> profiling{false};
  std::atomic<int32_t> profile_pieces_done{0};
  std::atomic<int32_t> profile_pieces_planned{0};

  // The name clients use: the loaded model's (a reload may rename it), else the spec's.
  std::string name() const {
    std::string current = service->state() == ServiceState::ready ? service->model_name() : "";
    return current.empty() ? spec.name : current;
  }

  std::shared_ptr<OnlineLatencyModel> latency() const {
    std::lock_guard lock(mu_);
    return latency_;
  }
  void set_latency(LatencyModel m) {
    auto online = std::make_shared<OnlineLatencyModel>(std::move(m));
    std::lock_guard lock(mu_);
    latency_ = std::move(online);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<OnlineLatencyModel> latency_;
};

}  // namespace edgelm::serve
