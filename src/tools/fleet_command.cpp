// `edgelm fleet`: the nodes of an edgelm cluster as one.
//   edgelm fleet reload --nodes URL,... (--model PATH | --upload FILE) [--name N] [--token-env VAR]
//     a rolling model update, one node at a time, with rollback (tools/fleet_rollout.h)
//   edgelm fleet prewarm --nodes URL,... --file BODY.json [--token-env VAR] [--timeout S]
//     POST /admin/kv/prewarm with the file's JSON body ({"prompts": [...]} / {"messages": ...})
//     to every node in turn, so each computes and persists those prefixes (its --kv-disk);
//     exit 1 when a node fails (the others are still prewarmed).
//   edgelm fleet status --nodes URL,... [--json]
//     every node's model, state, load (in flight / queue / running) and upstream breaker in one
//     table (GET /health); exit 1 when a node does not answer or is not serving.
#include <cstdlib>
#include <fstream>

#include "tools/command.h"
#include "tools/fleet_node.h"
#include "tools/fleet_rollout.h"

namespace edgelm::tools {
namespace {

struct FleetFlags {
  std::string nodes, model, upload, name, token_env = "EDGELM_ADMIN_TOKEN", file;
  double drain_timeout_s = 120, ready_timeout_s = 300, settle_s = 2, timeout_s = 600;
  bool json = false;
};

int run_reload(const FleetFlags& f) {
  auto nodes = parse_node_list(f.nodes);
  if (!nodes) return report_error(nodes.error());
  FleetReloadOptions o;
  o.nodes = *nodes;
  o.model_path = f.model;
  o.upload_path = f.upload;
  o.model_name = f.name;
  const char* token = std::getenv(f.token_env.c_str());
  if (token == nullptr || *token == '\0')
    return report_error(
        Error{fmt::format("the admin token variable {} is not set (--token-env names it)", f.token_env)});
  o.token = token;
  o.drain_timeout_s = f.drain_timeout_s;
  o.ready_timeout_s = f.ready_timeout_s;
  o.settle_s = f.settle_s;
  auto r = run_fleet_reload(o, stderr);
  if (!r) return report_error(r.error());
  std::printf("fleet reload: %zu node(s) now serve '%s'\n", r->updated.size(), r->model.c_str());
  return 0;
}

int run_prewarm(const FleetFlags& f) {
  auto nodes = parse_node_list(f.nodes);
  if (!nodes) return report_error(nodes.error());
  const char* token = std::getenv(f.token_env.c_str());
  if (token == nullptr || *token == '\0')
    return report_error(
        Error{fmt::format("the admin token variable {} is not set (--token-env names it)", f.token_env)});
  std::ifstream in(f.file);
  const nlohmann::json body = nlohmann::json::parse(in, nullptr, false);
  if (!in.good() && !in.eof()) return report_error(Error{fmt::format("--file {}: cannot read it", f.file)});
  if (!body.is_object())
    return report_error(Error{fmt::format("--file {}: not a JSON object (the /admin/kv/prewarm body)", f.file)});
  bool all_ok = true;
  for (const std::string& url : *nodes) {
    auto n = FleetNode::make(url, token);
    auto r = n ? n->prewarm(body, f.timeout_s) : Result<nlohmann::json>(n.error());
    if (!r) {
      all_ok = false;
      std::fprintf(stderr, "fleet prewarm: %s\n", r.error().message.c_str());
      continue;
    }
    std::printf("%s: %d prompt(s), %lld tokens (%lld already cached), %s, %lld block(s) written\n", url.c_str(),
                r->value("prompts", 0), static_cast<long long>(r->value("prompt_tokens", int64_t{0})),
                static_cast<long long>(r->value("cached_tokens", int64_t{0})),
                r->value("disk", false) ? "on disk" : "no disk tier (RAM only)",
                static_cast<long long>(r->value("disk_blocks_written", int64_t{0})));
  }
  return all_ok ? 0 : 1;
}

int run_status(const FleetFlags& f) {
  auto nodes = parse_node_list(f.nodes);
  if (!nodes) return report_error(nodes.error());
  bool all_serving = true;
  nlohmann::json out = nlohmann::json::array();
  std::string table = fmt::format("{:<28} {:<22} {:<11} {:>9} {:>6} {:>8}  {}\n", "NODE", "MODEL", "STATE", "IN-FLIGHT",
                                  "QUEUE", "RUNNING", "BREAKER");
  for (const std::string& url : *nodes) {
    auto n = FleetNode::make(url, "");
    auto h = n ? n->health() : Result<NodeHealth>(n.error());
    if (!h) {
      all_serving = false;
      table += fmt::format("{:<28} {:<22} {:<11} {:>9} {:>6} {:>8}  {}\n", url, "-", "unreachable", "-", "-", "-", "-");
      out.push_back({{"node", url}, {"state", "unreachable"}, {"error", h.error().message}});
      continue;
    }
    all_serving &= h->http_status == 200;
    table += fmt::format("{:<28} {:<22} {:<11} {:>9} {:>6} {:>8}  {}\n", url, h->model, h->state, h->in_flight,
                         h->queue_depth, h->running, h->breaker.empty() ? "-" : h->breaker);
    out.push_back({{"node", url},
                   {"http_status", h->http_status},
                   {"model", h->model},
                   {"state", h->state},
                   {"model_state", h->model_state},
                   {"drained", h->drained},
                   {"in_flight", h->in_flight},
                   {"queue_depth", h->queue_depth},
                   {"running", h->running},
                   {"breaker", h->breaker.empty() ? nlohmann::json() : nlohmann::json(h->breaker)}});
  }
  if (f.json)
    std::printf("%s\n", out.dump().c_str());
  else
    std::fputs(table.c_str(), stdout);
  return all_serving ? 0 : 1;
}

}  // namespace

CommandRunner add_fleet_command(CLI::App& app) {
  auto f = std::make_shared<FleetFlags>();
  CLI::App* cmd = app.add_subcommand("fleet", "Operate several edgelm nodes: rolling reload, prefix prewarm, status");
  cmd->require_subcommand(1);
  CLI::App* reload = cmd->add_subcommand("reload", "Rolling model update, one node at a time, rolled back on failure");
  reload->add_option("--nodes", f->nodes, "Node base URLs, comma-separated, updated in this order")->required();
  auto* model = reload->add_option("--model", f->model, "Model path on the nodes (POST /reload {\"path\"})");
  auto* upload =
      reload->add_option("--upload", f->upload, "Local model file uploaded to each node")->check(CLI::ExistingFile);
  model->excludes(upload);
  reload->add_option("--name", f->name, "Model name to serve it under (default: the file's stem)");
  reload->add_option("--token-env", f->token_env, "Environment variable holding the admin token")
      ->capture_default_str();
  reload->add_option("--drain-timeout", f->drain_timeout_s, "Seconds a drained node's requests may take to finish")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  reload->add_option("--ready-timeout", f->ready_timeout_s, "Seconds a reloaded model may take to be ready")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  reload
      ->add_option("--settle", f->settle_s,
                   "Seconds after a node is back before the next is drained (balancer health checks)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI::App* prewarm =
      cmd->add_subcommand("prewarm", "Every node computes and persists the prefixes of a POST /admin/kv/prewarm body");
  prewarm->add_option("--nodes", f->nodes, "Node base URLs, comma-separated")->required();
  prewarm->add_option("--file", f->file, "JSON body: {\"prompts\": [...]} and/or {\"messages\": ...}")
      ->required()
      ->check(CLI::ExistingFile);
  prewarm->add_option("--token-env", f->token_env, "Environment variable holding the admin token")
      ->capture_default_str();
  prewarm->add_option("--timeout", f->timeout_s, "Seconds one node may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI::App* status = cmd->add_subcommand("status", "Every node's model, state, load and breaker in one table");
  status->add_option("--nodes", f->nodes, "Node base URLs, comma-separated")->required();
  status->add_flag("--json", f->json, "One JSON array instead of the table");
  return [f, reload, prewarm, status]() -> int {
    if (prewarm->parsed()) return run_prewarm(*f);
    if (reload->parsed()) {
      if (f->model.empty() && f->upload.empty())
        return report_error(Error{"fleet reload: give --model PATH (on the nodes) or --upload FILE"});
      return run_reload(*f);
    }
    (void)status;
    return run_status(*f);
  };
}

}  // namespace edgelm::tools
