#include "tools/fleet_rollout.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "tools/fleet_node.h"

namespace edgelm::tools {
namespace {

using Clock = std::chrono::steady_clock;

void say(std::FILE* log, const std::string& line) {
  if (log == nullptr) return;
  std::fprintf(log, "fleet: %s\n", line.c_str());
  std::fflush(log);
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Polls /health until `done` holds; the last answer (or error) goes into the timeout's message.
template <typename Pred>
Status wait_health(const FleetNode& n, double timeout_s, double poll_s, const char* what, Pred done) {
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string last = "no answer yet";
  for (;;) {
    auto h = n.health();
    if (h.ok()) {
      if (done(*h)) return {};
      last = fmt::format("/health {} state {}, model {} ({}), {} in flight", h->http_status, h->state, h->model,
                         h->model_state, h->in_flight);
    } else {
      last = h.error().message;
    }
    if (Clock::now() >= until)
      return make_error("{}: {} did not happen within {:g} s (last: {})", n.url(), what, timeout_s, last);
    sleep_s(poll_s);
  }
}

// What a node served before its update: the model path its drain reported.
struct Previous {
  std::string model, path, tokenizer;
};

// One node to `path` (or the upload): drain, wait idle, reload, ready, smoke, undrain. `prev`
// gets what it served; `reloaded` says whether its model changed (so a rollback must reload).
Status update_node(const FleetNode& n, const FleetReloadOptions& o, const std::string& path, bool upload,
                   const std::string& sha256, const std::string& name, Previous& prev, bool& reloaded,
                   std::string& served, std::FILE* log) {
  reloaded = false;
  auto d = n.drain();
  if (!d) return d.error();
  prev.model = d->model;
  prev.path = d->model_path;
  prev.tokenizer = d->tokenizer_path;
  say(log, fmt::format("{}: drained ({} serving '{}', {} in flight)", n.url(), d->model, d->model_path, d->in_flight));
  EDGELM_TRY_STATUS(wait_health(n, o.drain_timeout_s, o.poll_s, "the in-flight requests finishing",
                                [](const NodeHealth& h) { return h.in_flight == 0; }));
  auto r = upload ? n.reload_upload(path, sha256, name) : n.reload_path(path, name);
  if (!r) return r.error();
  reloaded = true;
  served = *r;
  say(log, fmt::format("{}: reloaded, now '{}'", n.url(), *r));
  EDGELM_TRY_STATUS(wait_health(n, o.ready_timeout_s, o.poll_s, "the new model being ready",
                                [&](const NodeHealth& h) { return h.model_state == "ready" && h.model == served; }));
  auto s = n.smoke();
  if (!s) return s.error();
  if (s->model != served)
    return make_error("{}: POST /admin/smoke answered from model '{}', expected '{}'", n.url(), s->model, served);
  say(log, fmt::format("{}: smoke ok ({} tokens in {:.0f} ms)", n.url(), s->completion_tokens, s->latency_ms));
  EDGELM_TRY_STATUS(n.undrain());
  EDGELM_TRY_STATUS(wait_health(n, o.ready_timeout_s, o.poll_s, "/health 200 after undrain",
                                [](const NodeHealth& h) { return h.http_status == 200; }));
  say(log, fmt::format("{}: back in rotation", n.url()));
  return {};
}

// Puts one node back on `prev` (best effort, errors reported); true when it worked.
bool roll_back(const FleetNode& n, const FleetReloadOptions& o, const Previous& prev, bool drained_now, std::FILE* log,
               std::string& problems) {
  Status st = [&]() -> Status {
    if (!drained_now) {
      auto d = n.drain();
      if (!d) return d.error();
    }
    EDGELM_TRY_STATUS(wait_health(n, o.drain_timeout_s, o.poll_s, "the in-flight requests finishing",
                                  [](const NodeHealth& h) { return h.in_flight == 0; }));
    auto r = n.reload_path(prev.path, prev.model, prev.tokenizer);
    if (!r) return r.error();
    EDGELM_TRY_STATUS(wait_health(n, o.ready_timeout_s, o.poll_s, "the previous model being ready",
                                  [&](const NodeHealth& h) { return h.model_state == "ready"; }));
    auto s = n.smoke();
    if (!s) return s.error();
    return n.undrain();
  }();
  if (st.ok()) {
    say(log, fmt::format("{}: rolled back to '{}'", n.url(), prev.model));
    return true;
  }
  problems += fmt::format("; rollback of {} failed: {}", n.url(), st.error().message);
  Status u = n.undrain();  // serving the new model beats serving nothing
  (void)u;
  return false;
}

}  // namespace

Result<FleetReloadReport> run_fleet_reload(const FleetReloadOptions& o, std::FILE* log) {
  if (o.nodes.empty()) return make_error("--nodes: no node given");
  if (o.model_path.empty() == o.upload_path.empty())
    return make_error("give exactly one of --model PATH or --upload FILE");
  if (o.token.empty())
    return make_error("no admin token: set the variable named by --token-env (default EDGELM_ADMIN_TOKEN)");
  const bool upload = !o.upload_path.empty();
  const std::string path = upload ? o.upload_path : o.model_path;
  std::string sha256;
  if (upload) {
    EDGELM_TRY(sha256, file_sha256(path));
    say(log, fmt::format("uploading {} (sha256 {})", path, sha256.substr(0, 16)));
  }
  std::vector<FleetNode> nodes;
  for (const std::string& url : o.nodes) {
    EDGELM_TRY(FleetNode n, FleetNode::make(url, o.token));
    auto h = n.health();
    if (!h) return make_error("before the update: {}", h.error().message);
    if (h->http_status != 200 || h->drained)
      return make_error("before the update: {} is not serving (/health {} state {}); nothing was changed", url,
                        h->http_status, h->state);
    nodes.push_back(std::move(n));
  }
  FleetReloadReport rep;
  std::vector<Previous> prevs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const FleetNode& n = nodes[i];
    say(log, fmt::format("node {}/{} {}", i + 1, nodes.size(), n.url()));
    Previous prev;
    bool reloaded = false;
    std::string served;
    Status st = update_node(n, o, path, upload, sha256, o.model_name, prev, reloaded, served, log);
    if (st.ok()) {
      rep.updated.push_back(n.url());
      rep.model = served;
      prevs.push_back(prev);
      if (i + 1 < nodes.size() && o.settle_s > 0) sleep_s(o.settle_s);
      continue;
    }
    say(log, fmt::format("{}: FAILED: {}; rolling back", n.url(), st.error().message));
    std::string problems;
    std::vector<std::string> back;
    if (reloaded && !prev.path.empty()) {
      if (roll_back(n, o, prev, /*drained_now=*/true, log, problems)) back.push_back(n.url());
    } else {
      Status u = n.undrain();  // its old model still serves
      if (!u) problems += fmt::format("; undrain of {} failed: {}", n.url(), u.error().message);
    }
    for (size_t k = rep.updated.size(); k-- > 0;)
      if (roll_back(nodes[k], o, prevs[k], /*drained_now=*/false, log, problems)) back.push_back(nodes[k].url());
    std::string done = !back.empty()                      ? "rolled back: "
                       : rep.updated.empty() && !reloaded ? "no node had changed"
                                                          : "nothing rolled back";
    for (size_t k = 0; k < back.size(); ++k) done += (k > 0 ? ", " : "") + back[k];
    return make_error("node {} of {} failed: {} ({}{})", i + 1, nodes.size(), st.error().message, done, problems);
  }
  return rep;
}

}  // namespace edgelm::tools
