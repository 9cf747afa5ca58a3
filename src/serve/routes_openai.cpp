// OpenAI-compatible routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models.
//
// Supported request fields: model ("auto" or absent: the router chooses; a model's name pins
// it), latency_budget_ms (or header x-latency-budget-ms) and complexity (routing.h), prompt / messages,
// max_tokens, temperature, top_p, seed, stop (string or array), stream,
// stream_options.include_usage, presence_penalty, frequency_penalty, n (1 only), and the
// extensions deadline_ms, ignore_eos and cache (false: bypass the response cache,
// routes_cache.h). OpenAI's sampling semantics: no top-k or min-p unless asked (top_k, min_p
// extensions). Streams send `data: {chunk}` events and end with `data: [DONE]`.
// Structured output: response_format and grammar (structured_output.h) on both endpoints; on
// chat also tools, tool_choice, parallel_tool_calls, assistant tool_calls and tool messages
// (tool_calls.h), answered as message.tool_calls / delta.tool_calls with finish_reason
// "tool_calls". Images (chat, with --mmproj): image_url content parts with data:, file:// or
// http(s):// URLs (image_input.h, image_parts.h), each a 400 naming the part when it cannot be used.
#include <algorithm>
#include <chrono>
#include <ctime>

#include "serve/chat_template.h"
#include "serve/http_server.h"
#include "serve/image_input.h"
#include "serve/image_parts.h"
#include "serve/reasoning.h"
#include "serve/response_id.h"
#include "serve/routes_cache.h"
#include "serve/structured_output.h"
#include "serve/tool_calls.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;

struct GenRequest {
  engine::Request req;
  bool stream = false;
  bool include_usage = false;
};

// Fields shared by both endpoints; `max_tokens` default is the caller's.
std::optional<ApiError> parse_common(const json& body, GenRequest& g) {
  sample::SamplingParams& s = g.req.sampling;
  s = sample::SamplingParams{};
  s.temperature = 1.0f;  // OpenAI's defaults
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  double temperature = s.temperature, top_p = s.top_p, min_p = s.min_p, presence = 0, frequency = 0;
  int32_t top_k = 0, n = 1, deadline_ms = -1;
  uint64_t seed = 0;
  if (auto e = json_get(body, "max_tokens", g.req.max_new_tokens)) return e;
  if (auto e = json_get(body, "temperature", temperature)) return e;
  if (auto e = json_get(body, "top_p", top_p)) return e;
  if (auto e = json_get(body, "top_k", top_k)) return e;
  if (auto e = json_get(body, "min_p", min_p)) return e;
  if (auto e = json_get(body, "presence_penalty", presence)) return e;
  if (auto e = json_get(body, "frequency_penalty", frequency)) return e;
  if (auto e = json_get(body, "seed", seed)) return e;
  if (auto e = json_get(body, "n", n)) return e;
  if (auto e = json_get(body, "stream", g.stream)) return e;
  if (auto e = json_get(body, "deadline_ms", deadline_ms)) return e;
  bool ignore_eos = false;
  if (auto e = json_get(body, "ignore_eos", ignore_eos)) return e;
  g.req.stop_at_eog = !ignore_eos;
  if (n != 1) return ApiError{400, "only n = 1 is supported", "invalid_request_error", "n", "unsupported_value"};
  if (g.req.max_new_tokens < 0)
    return ApiError{400, fmt::format("'max_tokens' must be >= 0, got {}", g.req.max_new_tokens),
                    "invalid_request_error", "max_tokens", "invalid_value"};
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return ApiError{400, "'stream_options' must be an object", "invalid_request_error", "stream_options",
                      "invalid_type"};
    if (auto e = json_get(*it, "include_usage", g.include_usage)) return e;
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      g.req.stop_strings.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const json& x : *it) {
        if (!x.is_string())
          return ApiError{400, "'stop' must be a string or an array of strings", "invalid_request_error", "stop",
                          "invalid_type"};
        g.req.stop_strings.push_back(x.get<std::string>());
      }
    } else {
      return ApiError{400, "'stop' must be a string or an array of strings", "invalid_request_error", "stop",
                      "invalid_type"};
    }
    std::erase_if(g.req.stop_strings, [](const std::string& x) { return x.empty(); });
  }
  if (deadline_ms >= 0) g.req.deadline = engine::Clock::now() + std::chrono::milliseconds(deadline_ms);
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  s.top_k = top_k;
  s.min_p = static_cast<float>(min_p);
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  s.seed = seed;
  if (Status st = sample::validate(s); !st.ok())
    return ApiError{400, st.error().message, "invalid_request_error", "", "invalid_value"};
  return std::nullopt;
}

// The prompt of /v1/completions: a string, a one-string array, or an array of token ids.
std::optional<ApiError> parse_prompt(const json& body, const tokenizer::Tokenizer& tok, std::vector<int32_t>& out) {
  auto it = body.find("prompt");
  const ApiError bad{400, "'prompt' must be a string, an array of one string, or an array of token ids",
                     "invalid_request_error", "prompt", "invalid_type"};
  if (it == body.end() || it->is_null())
    return ApiError{400, "'prompt' is required", "invalid_request_error", "prompt", "missing_field"};
  if (it->is_string()) {
    out = tok.encode(it->get<std::string>(), /*add_special=*/true, /*parse_special=*/false);
    return std::nullopt;
  }
  if (!it->is_array() || it->empty()) return bad;
  if (it->size() == 1 && (*it)[0].is_string()) {
    out = tok.encode((*it)[0].get<std::string>(), true, false);
    return std::nullopt;
  }
  for (const json& x : *it) {
    if (!x.is_number_integer()) return bad;
    out.push_back(x.get<int32_t>());
  }
  return std::nullopt;
}

ApiError bad_field(const std::string& param, std::string message, const char* code = "invalid_type") {
  return ApiError{400, std::move(message), "invalid_request_error", param, code};
}

// An image_url part: {"type": "image_url", "image_url": {"url": "...", "detail": "auto"|"low"|"high"}}
// (or "image_url": "..."); "detail" is OpenAI's resolution hint, accepted but without effect
// (the encoder has one resolution); any other key or value is an error.
std::optional<ApiError> image_part(const json& part, const std::string& p, std::string& url) {
  for (const auto& [key, v] : part.items())
    if (key != "type" && key != "image_url")
      return bad_field(p + "." + key, fmt::format("'{}.{}' is not a field of an image_url part", p, key),
                       "unknown_parameter");
  const json& iu = part.value("image_url", json());
  if (iu.is_string()) {
    url = iu.get<std::string>();
    return std::nullopt;
  }
  if (!iu.is_object() || !iu.contains("url") || !iu["url"].is_string())
    return bad_field(p + ".image_url",
                     fmt::format("'{}.image_url' must be {{\"url\": \"data:image/...;base64,...\"}}", p));
  for (const auto& [key, v] : iu.items()) {
    if (key == "url") continue;
    if (key != "detail")
      return bad_field(p + ".image_url." + key, fmt::format("'{}.image_url.{}' is not a field of image_url", p, key),
                       "unknown_parameter");
    if (!v.is_string() || (v != "auto" && v != "low" && v != "high"))
      return bad_field(p + ".image_url.detail", fmt::format("'{}.image_url.detail' must be one of auto, low, high", p),
                       "invalid_value");
  }
  url = iu["url"].get<std::string>();
  return std::nullopt;
}

// A message's content: a string, or an array of {"type": "text", "text"} parts (joined) and
// image_url parts (each leaves kImageMarker in the text and its URL in `images`).
std::optional<ApiError> message_content(const json& c, const std::string& param, std::string& out,
                                        std::vector<ImagePart>& images) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array())
    return bad_field(param, fmt::format("'{}' must be a string or an array of text and image_url parts", param));
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (part.is_object() && part.value("type", json()) == "image_url") {
      std::string url;
      if (auto e = image_part(part, p, url)) return e;
      out += kImageMarker;
      images.push_back({p, std::move(url), false});
      continue;
    }
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return bad_field(p, fmt::format("'{}' must be a {{\"type\": \"text\", \"text\": ...}} or an image_url part", p));
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

// An assistant message's tool_calls and a tool message's tool_call_id.
std::optional<ApiError> message_tool_fields(const json& m, const std::string& param, ChatMessage& cm) {
  if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
    if (cm.role != "assistant")
      return bad_field(param + ".tool_calls", fmt::format("'{}.tool_calls' is only valid on assistant messages", param),
                       "invalid_value");
    if (!tc->is_array())
      return bad_field(param + ".tool_calls", fmt::format("'{}.tool_calls' must be an array", param));
    for (size_t i = 0; i < tc->size(); ++i) {
      const json& c = (*tc)[i];
      const std::string p = fmt::format("{}.tool_calls[{}]", param, i);
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].value("name", json()).is_string())
        return bad_field(
            p, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}", p));
      ChatToolCall call;
      call.name = c["function"]["name"].get<std::string>();
      call.id = c.value("id", json()).is_string() ? c["id"].get<std::string>() : std::string();
      const json args = c["function"].value("arguments", json());
      if (args.is_string()) {
        call.arguments = args.get<std::string>();
        if (!json::accept(call.arguments))
          return bad_field(p + ".function.arguments",
                           fmt::format("'{}.function.arguments' must be a JSON object as a string", p),
                           "invalid_value");
      } else if (args.is_object()) {
        call.arguments = args.dump();
      } else if (!args.is_null()) {
        return bad_field(p + ".function.arguments", fmt::format("'{}.function.arguments' must be a string", p));
      }
      cm.tool_calls.push_back(std::move(call));
    }
  }
  if (cm.role == "tool") {
    auto id = m.find("tool_call_id");
    if (id == m.end() || !id->is_string())
      return bad_field(param + ".tool_call_id", fmt::format("'{}.tool_call_id' is required on tool messages", param),
                       "missing_field");
    cm.tool_call_id = id->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& body, std::vector<ChatMessage>& out,
                                       std::vector<ImagePart>& images) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    return ApiError{400, "'messages' is required", "invalid_request_error", "messages", "missing_field"};
  if (!it->is_array() || it->empty())
    return ApiError{400, "'messages' must be a non-empty array", "invalid_request_error", "messages", "invalid_type"};
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return ApiError{400, fmt::format("'{}' must be an object with a string 'role'", param), "invalid_request_error",
                      param, "invalid_type"};
    ChatMessage cm;
    cm.role = m["role"].get<std::string>();
    if (auto c = m.find("content"); c != m.end() && !c->is_null()) {
      if (auto e = message_content(*c, param + ".content", cm.content, images)) return e;
    }
    if (auto e = message_tool_fields(m, param, cm)) return e;
    out.push_back(std::move(cm));
  }
  return std::nullopt;
}

// reasoning: a thinking model's answer also reports its reasoning tokens.
json usage_json(const Generation& g, bool reasoning = false) {
  json u = {{"prompt_tokens", g.prompt_tokens},
            {"completion_tokens", g.completion_tokens},
            {"total_tokens", g.prompt_tokens + g.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", g.cached_tokens}}}};
  if (reasoning) u["completion_tokens_details"] = {{"reasoning_tokens", g.reasoning_tokens}};
  return u;
}

json null_if_none(engine::Finish f) { return f == engine::Finish::none ? json(nullptr) : json(finish_reason(f)); }

// The user-visible text of a request (complexity, prompt length per model) before any model
// is chosen: the messages joined, or the prompt string; a prompt of token ids gives its count.
void describe_prompt(const json& body, bool chat, RouteRequest& rr) {
  if (chat) {
    if (auto it = body.find("messages"); it != body.end() && it->is_array())
      for (const json& m : *it)
        if (m.is_object() && m.contains("content") && m["content"].is_string())
          rr.prompt_text += m["content"].get<std::string>() + "\n";
    return;
  }
  auto it = body.find("prompt");
  if (it == body.end()) return;
  if (it->is_string())
    rr.prompt_text = it->get<std::string>();
  else if (it->is_array() && it->size() == 1 && (*it)[0].is_string())
    rr.prompt_text = (*it)[0].get<std::string>();
  else if (it->is_array())
    rr.prompt_ids = static_cast<int32_t>(it->size());
}

// A soft token cap or "no reasoning chain" asked for in the prompt: a system message first.
void add_instruction(std::vector<ChatMessage>& messages, const std::string& instruction) {
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n" + instruction;
    return;
  }
  messages.insert(messages.begin(), ChatMessage{"system", instruction});
}

void handle_generation(ServerContext& ctx, const http::Request& http_req, http::Response& res, bool chat) {
  const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, endpoint, err);
  std::optional<json> body = ServerContext::parse_body(http_req, err);
  if (!body) return ctx.send_error(res, endpoint, err);
  GenRequest g;
  g.req.max_new_tokens = 16;
  if (auto e = parse_common(*body, g)) return ctx.send_error(res, endpoint, *e);
  const bool max_given = body->contains("max_tokens") && !(*body)["max_tokens"].is_null();
  const int32_t requested_max = g.req.max_new_tokens;  // before the router's token budget
  std::vector<ChatMessage> messages;
  std::vector<ImagePart> image_parts;
  std::optional<ToolSpec> tools;
  const nlohmann::ordered_json obody = ordered_body(http_req);  // schemas keep their property order
  if (chat) {
    if (auto e = parse_messages(*body, messages, image_parts)) return ctx.send_error(res, endpoint, *e);
    if (auto e = parse_tools(obody, tools)) return ctx.send_error(res, endpoint, *e);
  } else {
    for (const char* f : {"tools", "tool_choice", "parallel_tool_calls"})
      if (body->contains(f) && !(*body)[f].is_null())
        return ctx.send_error(
            res, endpoint,
            bad_field(f, fmt::format("'{}' is only supported on /v1/chat/completions", f), "unsupported_parameter"));
  }
  std::optional<OutputConstraint> constraint;
  if (auto e = parse_output_constraint(obody, constraint)) return ctx.send_error(res, endpoint, *e);
  const bool tool_mode = tools && tools->choice != ToolChoice::none;
  // Thinking models (reasoning.h): on chat, when the model's template writes reasoning markers.
  const std::optional<ReasoningFormat> rformat =
      chat ? reasoning_format(*ctx.service().chat_format(), ctx.service().model().model->file().metadata, ctx.config())
           : std::nullopt;
  ReasoningRequest rreq;
  json template_kwargs;  // chat_template_kwargs (null when absent)
  if (chat) {
    if (auto e = parse_reasoning(*body, ctx.config(), rformat ? &*rformat : nullptr, rreq))
      return ctx.send_error(res, endpoint, *e);
    if (auto e = parse_template_kwargs(*body, rformat ? &*rformat : nullptr, rreq, template_kwargs))
      return ctx.send_error(res, endpoint, *e);
  } else {
    for (const char* f : {"reasoning_budget", "reasoning_budget_ms", "reasoning_effort", "chat_template_kwargs"})
      if (body->contains(f) && !(*body)[f].is_null())
        return ctx.send_error(
            res, endpoint,
            bad_field(f, fmt::format("'{}' is only supported on /v1/chat/completions", f), "unsupported_parameter"));
  }
  if (tool_mode && constraint)
    return ctx.send_error(
        res, endpoint,
        bad_field(body->contains("grammar") ? "grammar" : "response_format",
                  "a JSON 'response_format' or 'grammar' cannot be combined with tool_choice auto, required or a named "
                  "tool: the answer is either text or tool calls (send tool_choice \"none\" to constrain the text)",
                  "invalid_value"));

  RouteRequest rr;  // the router (routing.h) picks the model and the token budget
  rr.endpoint = endpoint;
  rr.upstream_ok = chat;
  if (max_given) rr.max_tokens = g.req.max_new_tokens;
  describe_prompt(*body, chat, rr);
  Routed routed;
  if (auto e = ctx.route_request(rr, *body, http_req, res, routed)) return ctx.send_error(res, endpoint, *e);
  if (routed.upstream()) {
    std::optional<ApiError> fallback_error;
    if (serve_from_upstream(ctx, routed, *body, g.stream, endpoint, res, fallback_error) == UpstreamOutcome::answered)
      return;
    if (fallback_error) return ctx.send_error(res, endpoint, *fallback_error);
  }
  if (!max_given)
    g.req.max_new_tokens = chat ? ctx.service().n_ctx() : 16;  // OpenAI: 16; chat: until the context is full
  if (routed.decision) {
    g.req.max_new_tokens = std::min(g.req.max_new_tokens, routed.decision->max_tokens);
    if (chat && !routed.decision->instruction.empty()) add_instruction(messages, routed.decision->instruction);
  }
  if (routed.model != nullptr && routed.model->spec.dyn_temp) g.req.sampling.dyn_temp = *routed.model->spec.dyn_temp;
  // The band's reasoning budget for thinking models, unless the request set its own.
  if (routed.decision && routed.decision->reasoning_budget >= 0 && !rreq.budget_tokens)
    rreq.budget_tokens = routed.decision->reasoning_budget;
  // What the template renders with: the request's kwargs, enable_thinking following the budget.
  const json kwargs = chat ? effective_template_kwargs(template_kwargs, rformat ? &*rformat : nullptr, rreq) : json();

  const tokenizer::Tokenizer& tok = ctx.service().tokenizer();
  std::vector<EncodedImage> images;
  if (!image_parts.empty())
    if (auto e = encode_image_parts(ctx, image_parts, images, res)) return ctx.send_error(res, endpoint, *e);
  CacheQuery cq;  // what the response cache keys on (routes_cache.h)
  ToolSyntax syntax = ToolSyntax::generic;
  bool starts_open = false;  // the output starts inside a reasoning span
  if (chat) {
    const std::shared_ptr<const ChatFormat> chat_format = ctx.service().chat_format();
    syntax = tool_syntax_for(chat_format->family);
    // Tools, tool calls and tool results in the family's own form (unless the model's Jinja
    // template renders them itself); the cache keys on that too.
    if (!chat_format->native_tools)
      messages = lower_tool_messages(syntax, tools ? &*tools : nullptr, std::move(messages));
    for (size_t i = 0; i < messages.size(); ++i) {
      const std::string line = messages[i].role + ": " + messages[i].content + "\n";
      cq.prompt += line;
      if (i + 1 < messages.size()) cq.context += line;
    }
    cq.query = messages.back().content;
    for (const EncodedImage& im : images) {  // another image with the same text is another key
      cq.prompt += "\x1fimage:" + im.sha256;
      cq.context += "\x1fimage:" + im.sha256;
    }
    if (kwargs.is_object() && !kwargs.empty()) cq.constraint += "kwargs=" + kwargs.dump() + ";";
    Result<std::string> text = chat_prompt_text(*chat_format, tok, messages, obody, &kwargs);
    if (text.ok() && !images.empty()) text = ctx.images()->expand_markers(*text, images);
    if (!text.ok())
      return ctx.send_error(res, endpoint,
                            {400, text.error().message, "invalid_request_error", "messages", "invalid_value"});
    if (rformat) {
      starts_open = apply_reasoning(*rformat, rreq, ctx.config(), tok, *text, g.req.reasoning);
      cq.constraint += fmt::format("reasoning={},{};", rreq.budget_tokens.value_or(-1), starts_open);
      cq.uncacheable = rreq.budget_ms.has_value();  // a wall-clock budget: the answer depends on timing
    }
    g.req.prompt = encode_chat_prompt(*chat_format, tok, *text);
    if (!images.empty()) {
      auto located = ctx.images()->locate(g.req.prompt, tok.vocab(), images);
      if (!located.ok())
        return ctx.send_error(res, endpoint,
                              {400, located.error().message, "invalid_request_error", "messages", "invalid_value"});
      g.req.images = std::move(located).value();
    }
    if (tool_mode) {
      std::string gbnf, trigger;
      if (auto e = tool_call_grammar(syntax, *tools, gbnf, trigger)) return ctx.send_error(res, endpoint, *e);
      Result<grammar::GrammarPtr> gr = compile_grammar(gbnf);
      if (!gr.ok())
        return ctx.send_error(
            res, endpoint,
            bad_field("tools", fmt::format("the tools' call grammar does not compile: {}", gr.error().message),
                      "invalid_value"));
      constraint = OutputConstraint{"tools", std::move(gbnf), std::move(trigger), *gr};
    }
  } else if (auto e = parse_prompt(*body, tok, g.req.prompt)) {
    return ctx.send_error(res, endpoint, *e);
  } else {
    const json& p = (*body)["prompt"];
    cq.prompt = p.is_string()                       ? p.get<std::string>()
                : p.size() == 1 && p[0].is_string() ? p[0].get<std::string>()
                                                    : p.dump();  // token ids
    cq.query = cq.prompt;
  }
  if (auto e = check_context_fit(g.req.prompt.size(), max_given ? std::optional<int32_t>(requested_max) : std::nullopt,
                                 ctx.service().n_ctx(), chat ? "messages" : "prompt"))
    return ctx.send_error(res, endpoint, *e);
  if (auto e = ctx.cache_scope(http_req, *body, g.req.cache_salt)) return ctx.send_error(res, endpoint, *e);
  if (constraint) {
    g.req.grammar = constraint->grammar;
    g.req.grammar_trigger = constraint->trigger;
    cq.constraint += constraint->trigger + '\x1f' + constraint->gbnf;
    ctx.metrics().record_constrained(ctx.model_name(), constraint->kind);
  }
  cq.endpoint = endpoint;
  cq.request = &g.req;
  cq.seeded = body->contains("seed") && !(*body)["seed"].is_null();
  const std::string id = new_response_id(chat ? "chatcmpl" : "cmpl");
  cq.response_id = id;
  auto cache_use = std::make_shared<CacheUse>(cache_lookup(ctx, http_req, *body, cq, res));
  const auto n_prompt = static_cast<int32_t>(g.req.prompt.size());

  const auto created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = ctx.model_name();
  const char* object = chat ? "chat.completion" : "text_completion";
  if (g.stream) {
    const char* chunk_object = chat ? "chat.completion.chunk" : "text_completion";
    auto first = std::make_shared<bool>(true);
    // Thinking models: the text is split into delta.reasoning_content and the answer first; tool
    // calls: the answer goes through the call parser, calls come out as delta.tool_calls.
    auto thoughts = rformat ? std::make_shared<ReasoningStream>(*rformat, starts_open) : nullptr;
    auto calls = tool_mode ? std::make_shared<ToolCallStream>(syntax, tools->tools) : nullptr;
    StreamWriter w;
    auto choice = [chat, first](const std::string& text, const json& tool_calls, const json& finish_reason,
                                const std::string& reasoning = {}) {
      json c = {{"index", 0}, {"finish_reason", finish_reason}};
      if (chat) {
        json delta = json::object();
        if (*first) delta["role"] = "assistant";
        if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
        if (!text.empty() || (finish_reason.is_null() && tool_calls.empty() && reasoning.empty()))
          delta["content"] = text;
        if (!tool_calls.empty()) delta["tool_calls"] = tool_calls;
        c["delta"] = delta;
      } else {
        c["text"] = text;
        c["logprobs"] = nullptr;
      }
      *first = false;
      return c;
    };
    auto envelope = [=](json choices) {
      return json{{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model}, {"choices", choices}};
    };
    // One chunk from a piece of text (or the end of the output): reasoning, answer, tool calls.
    auto piece = [=](const std::string& text, bool at_end) -> json {
      SplitOutput s;
      if (thoughts) {
        s = at_end ? thoughts->finish() : thoughts->feed(text);
      } else {
        s.content = text;
      }
      ToolCallStream::Delta d;
      if (calls) {
        ToolCallStream::Delta more = calls->feed(s.content);
        d = at_end ? calls->finish() : ToolCallStream::Delta{};
        more.content += d.content;
        for (json& f : d.tool_calls) more.tool_calls.push_back(std::move(f));
        d = std::move(more);
      } else {
        d.content = std::move(s.content);
      }
      if (d.content.empty() && d.tool_calls.empty() && s.reasoning.empty() && (at_end || thoughts || calls))
        return nullptr;  // held back: may start a marker or a call
      return envelope(json::array({choice(d.content, d.tool_calls, nullptr, s.reasoning)}));
    };
    w.chunk = [=](const std::string& text) -> json { return piece(text, false); };
    const bool include_usage = g.include_usage;
    const bool reasoning_usage = rformat.has_value();
    w.finish = [=](const Generation& gen) {
      std::vector<json> out;
      json reason = null_if_none(gen.finish);
      if (thoughts || calls)
        if (json rest = piece({}, true); !rest.is_null()) out.push_back(std::move(rest));
      if (calls && calls->n_calls() > 0 && gen.finish == engine::Finish::stop) reason = "tool_calls";
      json last = envelope(json::array({choice("", json::array(), reason)}));
      if (gen.finish == engine::Finish::error) last["error"] = {{"message", gen.error}, {"type", "server_error"}};
      out.push_back(std::move(last));
      if (include_usage) {
        json u = envelope(json::array());
        u["usage"] = usage_json(gen, reasoning_usage);
        out.push_back(std::move(u));
      }
      return out;
    };
    if (cache_use->hit()) return send_cached_stream(ctx, res, w, cached_generation(*cache_use, n_prompt), endpoint);
    w.finish = [&ctx, cache_use, finish = std::move(w.finish)](const Generation& gen) {
      cache_insert(ctx, *cache_use, gen);
      return finish(gen);
    };
    std::shared_ptr<RequestHandle> h = ctx.submit(std::move(g.req), err);
    if (!h) return ctx.send_error(res, endpoint, err);
    return ctx.stream(res, std::move(h), endpoint, std::move(w));
  }

  Generation gen;
  if (cache_use->hit()) {
    gen = cached_generation(*cache_use, n_prompt);
  } else {
    std::shared_ptr<RequestHandle> h = ctx.submit(std::move(g.req), err);
    if (!h) return ctx.send_error(res, endpoint, err);
    std::optional<Generation> done = ctx.run_to_end(*h, endpoint, http_req);
    if (!done) return;  // the client left
    gen = std::move(*done);
    cache_insert(ctx, *cache_use, gen);
  }
  if (gen.finish == engine::Finish::error) {
    ctx.record(endpoint, 500, gen);
    return ctx.send_json(
        res, 500,
        {{"error", {{"message", gen.error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
  }
  if (gen.finish == engine::Finish::deadline && gen.completion_tokens == 0) {
    ctx.record(endpoint, 504, gen);
    return ctx.send_json(res, 504,
                         {{"error",
                           {{"message", "the deadline passed before any token was generated"},
                            {"type", "timeout_error"},
                            {"param", "deadline_ms"},
                            {"code", "deadline_exceeded"}}}});
  }
  json c = {{"index", 0}, {"finish_reason", finish_reason(gen.finish)}};
  SplitOutput split;  // a thinking model's reasoning, then the answer
  if (rformat) {
    split = split_reasoning(*rformat, starts_open, gen.text);
  } else {
    split.content = gen.text;
  }
  if (chat && tool_mode) {
    ParsedToolOutput parsed = parse_tool_output(syntax, split.content, &tools->tools);
    json msg = {{"role", "assistant"}};
    msg["content"] = parsed.calls.empty() || !parsed.content.empty() ? json(parsed.content) : json(nullptr);
    if (!parsed.calls.empty()) {
      json list = json::array();
      for (ParsedCall& call : parsed.calls)
        list.push_back({{"id", new_tool_call_id()},
                        {"type", "function"},
                        {"function", {{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}});
      msg["tool_calls"] = std::move(list);
      if (gen.finish == engine::Finish::stop) c["finish_reason"] = "tool_calls";
    }
    c["message"] = std::move(msg);
  } else if (chat) {
    c["message"] = {{"role", "assistant"}, {"content", split.content}};
  } else {
    c["text"] = gen.text;
    c["logprobs"] = nullptr;
  }
  if (chat && !split.reasoning.empty()) c["message"]["reasoning_content"] = split.reasoning;
  ctx.record(endpoint, 200, gen);
  ctx.send_json(res, 200,
                {{"id", id},
                 {"object", object},
                 {"created", created},
                 {"model", model},
                 {"choices", json::array({c})},
                 {"usage", usage_json(gen, rformat.has_value())}});
}

}  // namespace

void register_openai_routes(http::Server& svr, ServerContext& ctx) {
  ctx.post_json(svr, "/v1/completions", http::RouteClass::work, [&ctx](const http::Request& req, http::Response& res) {
    handle_generation(ctx, req, res, /*chat=*/false);
  });
  ctx.post_json(
      svr, "/v1/chat/completions", http::RouteClass::work,
      [&ctx](const http::Request& req, http::Response& res) { handle_generation(ctx, req, res, /*chat=*/true); });
  ctx.get(svr, "/v1/models", http::RouteClass::control, [&ctx](const http::Request&, http::Response& res) {
    json data = json::array();
    for (const auto& m : ctx.models()) {
      const ServiceState st = m->service->state();
      json entry = {{"id", m->name()},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "edgelm"},
                    {"tier", tier_name(m->spec.tier)},
                    {"state", m->profiling.load() ? std::string("profiling") : std::string(service_state_name(st))}};
      if (auto lat = m->latency()) {
        const LatencyModel cur = lat->current();
        entry["latency_model"] = {{"prefill_ms_per_128_tokens", cur.prefill_ms(128)},
                                  {"decode_ms_per_token", cur.decode_ms(0)},
                                  {"observations", lat->n_observations()}};
      }
      // Image input (--mmproj) belongs to the first model.
      if (m.get() == ctx.models().front().get() && ctx.images() != nullptr)
        entry["capabilities"] = json::array({"completion", "vision"});
      data.push_back(std::move(entry));
    }
    if (UpstreamClient* up = ctx.upstream()) {
      data.push_back({{"id", up->config().name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "upstream"},
                      {"tier", "upstream"},
                      {"state", breaker_state_name(up->breaker().state())}});
    }
    ctx.send_json(res, 200, {{"object", "list"}, {"data", data}});
  });
}

}  // namespace edgelm::serve
