// The prefix KV cache's admin routes (admin token, as /reload: 403 without one configured, 401
// none sent, 403 wrong; control pool):
//
//   POST /admin/kv/prewarm  {"prompts"?: [string], "messages"?: [conversation] or a conversation
//                           (a conversation: [{"role", "content"}], rendered with the model's
//                           chat template and its generation prompt), "api_key"?: string,
//                           "cache_salt"?: string}: computes each prompt's KV (one greedy token
//                           each, one at a time) so that its full blocks are published, and with
//                           --kv-disk waits until they are on disk. The blocks are scoped as a
//                           request carrying that API key (and cache_salt) would be: with
//                           prefix_cache_scope "key" they serve that tenant only. 200
//                           {"model", "prompts", "prompt_tokens", "cached_tokens" (already
//                           cached before), "disk": bool (persisted), "disk_blocks_written"};
//                           400 names the bad field; 503 not ready.
//   POST /admin/kv/flush    {"tier"?: "all" | "ram" | "disk"}: drops the cached prefix blocks
//                           of RAM (those no request holds) and/or every block file of the disk
//                           tier. 200 {"ram_blocks_dropped", "disk_files_deleted"}.
#include "serve/chat_template.h"
#include "serve/http_server.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

// The body as a JSON object whose fields are all in `allowed` (an empty body: {}); else a 400 sent.
std::optional<json> kv_admin_body(ServerContext& ctx, const http::Request& req, http::Response& res,
                                  const std::string& endpoint, std::initializer_list<const char*> allowed) {
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  ApiError err;
  std::optional<json> body = ServerContext::parse_body(req, err);
  if (!body) {
    ctx.send_error(res, endpoint, err);
    return std::nullopt;
  }
  for (const auto& item : body->items()) {
    bool known = false;
    for (const char* a : allowed) known = known || item.key() == a;
    if (!known) {
      ctx.send_error(
          res, endpoint,
          {400, fmt::format("unknown field '{}'", item.key()), "invalid_request_error", item.key(), "unknown_field"});
      return std::nullopt;
    }
  }
  return body;
}

ApiError bad(const std::string& param, const std::string& msg) {
  return {400, msg, "invalid_request_error", param, "invalid_value"};
}

// One conversation of "messages": [{"role": string, "content": string}, ...], non-empty.
std::optional<ApiError> parse_conversation(const json& j, const std::string& param, std::vector<ChatMessage>& out) {
  if (!j.is_array() || j.empty()) return bad(param, fmt::format("'{}' must be a non-empty array of messages", param));
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const json& m = j[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return bad(p, fmt::format("'{}' must be an object with string 'role' and 'content'", p));
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return std::nullopt;
}

void handle_prewarm(ServerContext& ctx, const http::Request& req, http::Response& res) {
  const std::string endpoint = "/admin/kv/prewarm";
  if (!check_admin_token(ctx, req, res, endpoint)) return;
  std::optional<json> body = kv_admin_body(ctx, req, res, endpoint, {"prompts", "messages", "api_key", "cache_salt"});
  if (!body) return;
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);

  std::vector<std::string> prompts;
  if (auto it = body->find("prompts"); it != body->end()) {
    if (!it->is_array()) return ctx.send_error(res, endpoint, bad("prompts", "'prompts' must be an array of strings"));
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string() || (*it)[i].get<std::string>().empty())
        return ctx.send_error(
            res, endpoint,
            bad(fmt::format("prompts[{}]", i), fmt::format("'prompts[{}]' must be a non-empty string", i)));
      prompts.push_back((*it)[i].get<std::string>());
    }
  }
  std::vector<std::vector<ChatMessage>> chats;
  if (auto it = body->find("messages"); it != body->end()) {
    const bool one = it->is_array() && !it->empty() && (*it)[0].is_object();
    if (one) {
      chats.emplace_back();
      if (auto e = parse_conversation(*it, "messages", chats.back())) return ctx.send_error(res, endpoint, *e);
    } else if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        chats.emplace_back();
        if (auto e = parse_conversation((*it)[i], fmt::format("messages[{}]", i), chats.back()))
          return ctx.send_error(res, endpoint, *e);
      }
    } else {
      return ctx.send_error(res, endpoint, bad("messages", "'messages' must be a conversation or an array of them"));
    }
  }
  if (prompts.empty() && chats.empty())
    return ctx.send_error(
        res, endpoint,
        {400, "give 'prompts' or 'messages' to prewarm", "invalid_request_error", "prompts", "missing_field"});
  std::string api_key;
  if (auto e = json_get(*body, "api_key", api_key)) return ctx.send_error(res, endpoint, *e);
  std::string salt;
  if (auto e = ctx.cache_scope_for(api_key.empty() ? std::string() : "Bearer " + api_key, *body, salt))
    return ctx.send_error(res, endpoint, *e);

  EngineService::Pin pin = ctx.service().pin_model();  // every prompt to the same model
  const tokenizer::Tokenizer& tok = ctx.service().tokenizer();
  std::vector<std::pair<std::string, std::vector<int32_t>>> encoded;  // (param, tokens)
  for (size_t i = 0; i < prompts.size(); ++i)
    encoded.emplace_back(fmt::format("prompts[{}]", i), tok.encode(prompts[i], /*add_special=*/true, false));
  const std::shared_ptr<const ChatFormat> chat = ctx.service().chat_format();
  for (size_t i = 0; i < chats.size(); ++i) {
    Result<std::string> text = chat_prompt_text(*chat, tok, chats[i], nlohmann::ordered_json::object());
    if (!text.ok()) return ctx.send_error(res, endpoint, bad(fmt::format("messages[{}]", i), text.error().message));
    encoded.emplace_back(fmt::format("messages[{}]", i), encode_chat_prompt(*chat, tok, *text));
  }
  for (const auto& item : encoded)
    if (auto e = check_context_fit(item.second.size(), 1, ctx.service().n_ctx(), item.first.c_str()))
      return ctx.send_error(res, endpoint, *e);

  const int64_t written_before = ctx.service().stats().disk.writes;
  int64_t n_tokens = 0, n_cached = 0;
  for (auto& item : encoded) {
    engine::Request er;
    er.prompt = item.second;
    er.max_new_tokens = 1;
    er.sampling.temperature = 0.0f;
    er.cache_salt = salt;
    std::shared_ptr<RequestHandle> h = ctx.submit(std::move(er), err);
    if (!h) return ctx.send_error(res, endpoint, err);
    std::optional<Generation> g = ctx.run_to_end(*h, endpoint, req);
    if (!g) return;  // the caller left
    if (g->finish == engine::Finish::error)
      return ctx.send_error(res, endpoint, {500, g->error, "server_error", item.first, "generation_failed"});
    n_tokens += g->prompt_tokens;
    n_cached += g->cached_tokens;
  }
  const bool disk = ctx.service().drain_kv_disk();
  ctx.send_json(res, 200,
                {{"model", ctx.model_name()},
                 {"prompts", encoded.size()},
                 {"prompt_tokens", n_tokens},
                 {"cached_tokens", n_cached},
                 {"disk", disk},
                 {"disk_blocks_written", ctx.service().stats().disk.writes - written_before}});
}

void handle_flush(ServerContext& ctx, const http::Request& req, http::Response& res) {
  const std::string endpoint = "/admin/kv/flush";
  if (!check_admin_token(ctx, req, res, endpoint)) return;
  std::optional<json> body = kv_admin_body(ctx, req, res, endpoint, {"tier"});
  if (!body) return;
  std::string tier = "all";
  if (auto e = json_get(*body, "tier", tier)) return ctx.send_error(res, endpoint, *e);
  if (tier != "all" && tier != "ram" && tier != "disk")
    return ctx.send_error(res, endpoint, bad("tier", "'tier' must be one of all, ram, disk"));
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  auto dropped = ctx.service().flush_kv(tier != "disk", tier != "ram");
  if (!dropped.ok())
    return ctx.send_error(res, endpoint, {503, dropped.error().message, "server_error", "", "unavailable"});
  ctx.send_json(res, 200, {{"ram_blocks_dropped", dropped->first}, {"disk_files_deleted", dropped->second}});
}

}  // namespace

void register_kv_routes(http::Server& svr, ServerContext& ctx) {
  ctx.post_json(svr, "/admin/kv/prewarm", http::RouteClass::control,
                [&ctx](const http::Request& req, http::Response& res) { handle_prewarm(ctx, req, res); });
  ctx.post_json(svr, "/admin/kv/flush", http::RouteClass::control,
                [&ctx](const http::Request& req, http::Response& res) { handle_flush(ctx, req, res); });
}

}  // namespace edgelm::serve
