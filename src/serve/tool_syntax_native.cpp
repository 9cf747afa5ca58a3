// Qwen3.5's XML and Gemma 4's tool-call syntaxes (see tool_syntax_native.h).
#include "serve/tool_syntax_native.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "jinja/value.h"
#include "schema/gbnf_text.h"

namespace edgelm::serve::native_tools {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kQwenClose = "</tool_call>";
constexpr std::string_view kGemmaClose = "<tool_call|>";
constexpr std::string_view kGemmaQuote = "<|\"|>";

// A GBNF character-class item for `c` (escaped where the class syntax needs it).
std::string class_char(char c) {
  if (c == ']' || c == '\\' || c == '^' || c == '-') return std::string("\\") + c;
  if (c == '\n') return "\\n";
  return std::string(1, c);
}

// The rule of any text that does not contain `stop` (whose first character occurs in it only
// there, as in "</parameter>" and "<|\"|>"): runs of other characters, and prefixes of `stop` cut
// short by a character that neither continues it nor starts it again.
std::string text_until_rule(schema::GbnfBuilder& b, std::string_view name, std::string_view stop) {
  const std::string first = class_char(stop[0]);
  std::string cut, tail;
  for (size_t k = 1; k < stop.size(); ++k) {
    const std::string_view prefix = stop.substr(1, k - 1);
    cut += fmt::format(" | {}[^{}{}]", prefix.empty() ? "" : schema::gbnf_literal(prefix) + " ", class_char(stop[k]),
                       first);
    if (!prefix.empty()) tail += " | " + schema::gbnf_literal(prefix);
  }
  // ( [^first] | lead ( cut ) )* ( lead ( tail )? )?   where lead is one or more first characters
  const std::string lead = schema::gbnf_literal(stop.substr(0, 1)) + "+";
  return b.add_rule(
      name, fmt::format("( [^{}] | {} ( {} ) )* ( {} ( {} )? )?", first, lead, cut.substr(3), lead, tail.substr(3)));
}

// The property schemas of a tool's parameters (null when it declares none).
const json* properties_of(const ToolDef& t) {
  if (!t.parameters.is_object()) return nullptr;
  auto it = t.parameters.find("properties");
  return it != t.parameters.end() && it->is_object() ? &*it : nullptr;
}

bool is_required(const ToolDef& t, const std::string& key) {
  auto it = t.parameters.find("required");
  if (it == t.parameters.end() || !it->is_array()) return false;
  return std::find(it->begin(), it->end(), json(key)) != it->end();
}

// The "type" names of a property schema.
std::vector<std::string> types_of(const json& s) {
  std::vector<std::string> out;
  if (!s.is_object()) return out;
  auto it = s.find("type");
  if (it == s.end()) return out;
  if (it->is_string()) out.push_back(it->get<std::string>());
  if (it->is_array())
    for (const json& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

bool all_strings(const json& enumeration) {
  if (!enumeration.is_array() || enumeration.empty()) return false;
  return std::all_of(enumeration.begin(), enumeration.end(), [](const json& v) { return v.is_string(); });
}

// HF's tojson (json.dumps with ", " and ": ").
std::string tojson(const json& j) { return jinja::py_dumps(j, std::nullopt, ", ", ": ", false); }

// The value of a parameter read back: text for string properties (and unknown ones), JSON for others.
json qwen_value(const json* schema, const std::string& raw) {
  if (schema == nullptr) return raw;
  const std::vector<std::string> types = types_of(*schema);
  const bool has_string = std::find(types.begin(), types.end(), "string") != types.end();
  if (has_string || (types.empty() && all_strings(schema->value("enum", json())))) {
    const bool has_null = std::find(types.begin(), types.end(), "null") != types.end();
    if (has_null && raw == "null") return nullptr;
    return raw;
  }
  json v = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return raw;
  return v;
}

const ToolDef* find_tool(const std::vector<ToolDef>& tools, std::string_view name) {
  for (const ToolDef& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Qwen3.5 XML

std::string qwen_tools_block(const std::vector<ToolDef>& tools) {
  std::string s = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
  for (const ToolDef& t : tools) {
    json f = {{"name", t.name}};
    if (!t.description.empty()) f["description"] = t.description;
    if (!t.parameters.is_null()) f["parameters"] = t.parameters;
    s += '\n';
    s += tojson(json{{"type", "function"}, {"function", f}});
  }
  s += "\n</tools>";
  s += "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
       "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
       "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple "
       "lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
       "specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> "
       "XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function "
       "call in natural language BEFORE the function call, but NOT after\n- If there is no function call "
       "available, answer the question like normal with your current knowledge and do not tell the user about "
       "function calls\n</IMPORTANT>";
  return s;
}

std::string qwen_render_call(const ChatToolCall& c) {
  std::string out = "<tool_call>\n<function=" + c.name + ">\n";
  const json args = json::parse(c.arguments.empty() ? "{}" : c.arguments, nullptr, /*allow_exceptions=*/false);
  if (args.is_object())
    for (const auto& [key, value] : args.items())
      out += "<parameter=" + key + ">\n" + (value.is_string() ? value.get<std::string>() : tojson(value)) +
             "\n</parameter>\n";
  return out + "</function>\n</tool_call>";
}

Result<std::string> qwen_call_rule(schema::GbnfBuilder& b, const ToolDef& t) {
  std::string body = schema::gbnf_literal("<tool_call>\n<function=" + t.name + ">\n");
  const json* props = properties_of(t);
  if (props != nullptr) {
    for (const auto& [key, prop] : props->items()) {
      std::string value;
      const std::vector<std::string> types = types_of(prop);
      if (types.size() == 1 && types[0] == "string") {
        if (all_strings(prop.value("enum", json()))) {
          for (const json& e : prop["enum"])
            value += (value.empty() ? "" : " | ") + schema::gbnf_literal(e.get<std::string>());
          value = "( " + value + " )";
        } else {
          value = text_until_rule(b, "xml-text", "</parameter>");
        }
      } else {
        Result<std::string> r = b.add_schema(prop, "param-" + t.name + "-" + key);
        if (!r.ok()) return make_error("property '{}': {}", key, r.error().message);
        value = *r;
      }
      const std::string param = fmt::format("{} {} {}", schema::gbnf_literal("<parameter=" + key + ">\n"), value,
                                            schema::gbnf_literal("\n</parameter>\n"));
      body += is_required(t, key) ? " " + param : " ( " + param + " )?";
    }
  } else if (!t.parameters.is_null() && t.parameters.value("additionalProperties", json(true)) != json(false)) {
    // Free-form arguments: any names, text values.
    const std::string text = text_until_rule(b, "xml-text", "</parameter>");
    body += fmt::format(" ( {} [a-zA-Z0-9_.-]+ {} {} {} )*", schema::gbnf_literal("<parameter="),
                        schema::gbnf_literal(">\n"), text, schema::gbnf_literal("\n</parameter>\n"));
  }
  body += " " + schema::gbnf_literal("</function>\n</tool_call>");
  return b.add_rule("call-" + t.name, body);
}

Scan qwen_scan_call(std::string_view text, const std::vector<ToolDef>& tools, ParsedCall& call, size_t& used) {
  const size_t close = text.find(kQwenClose);
  if (close == std::string_view::npos) return Scan::incomplete;
  std::string_view body = trim(text.substr(kQwenOpen.size(), close - kQwenOpen.size()));
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>",
                             kParam = "<parameter=", kParamEnd = "</parameter>";
  if (!body.starts_with(kFn) || !body.ends_with(kFnEnd)) return Scan::invalid;
  const size_t gt = body.find('>');
  const std::string name(trim(body.substr(kFn.size(), gt - kFn.size())));
  if (name.empty() || name.find_first_of("<\n") != std::string::npos) return Scan::invalid;
  const ToolDef* tool = find_tool(tools, name);
  const json* props = tool != nullptr ? properties_of(*tool) : nullptr;
  std::string_view rest = body.substr(gt + 1, body.size() - kFnEnd.size() - gt - 1);
  json args = json::object();
  for (rest = trim(rest); !rest.empty(); rest = trim(rest)) {
    if (!rest.starts_with(kParam)) return Scan::invalid;
    const size_t kgt = rest.find('>');
    const size_t end = rest.find(kParamEnd);
    if (kgt == std::string_view::npos || end == std::string_view::npos || end < kgt) return Scan::invalid;
    const std::string key(trim(rest.substr(kParam.size(), kgt - kParam.size())));
    if (key.empty() || key.find_first_of("<\n") != std::string::npos || args.contains(key)) return Scan::invalid;
    std::string_view value = rest.substr(kgt + 1, end - kgt - 1);
    if (value.starts_with('\n')) value.remove_prefix(1);  // the template's newlines around a value
    if (value.ends_with('\n')) value.remove_suffix(1);
    const json* schema = props != nullptr && props->contains(key) ? &(*props)[key] : nullptr;
    args[key] = qwen_value(schema, std::string(value));
    rest = rest.substr(end + kParamEnd.size());
  }
  call = ParsedCall{name, args.dump()};
  used = close + kQwenClose.size();
  return Scan::complete;
}

// ---------------------------------------------------------------------------------------------
// Gemma 4

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string gquote(std::string_view s) { return std::string(kGemmaQuote) + std::string(s) + std::string(kGemmaQuote); }

// The keys of an object in Jinja's dictsort order (case-insensitive).
std::vector<std::string> sorted_keys(const json& obj) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : obj.items()) keys.push_back(k);
  std::stable_sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) {
    std::string la = a, lb = b;
    std::transform(la.begin(), la.end(), la.begin(), [](unsigned char c) { return std::tolower(c); });
    std::transform(lb.begin(), lb.end(), lb.begin(), [](unsigned char c) { return std::tolower(c); });
    return la < lb;
  });
  return keys;
}

// The template's format_argument: strings quoted, keys quoted when escape_keys.
std::string gemma_argument(const json& v, bool escape_keys) {
  if (v.is_string()) return gquote(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_object()) {
    std::string out = "{";
    for (const std::string& k : sorted_keys(v)) {
      if (out.size() > 1) out += ",";
      out += (escape_keys ? gquote(k) : k) + ":" + gemma_argument(v[k], escape_keys);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + gemma_argument(v[i], escape_keys);
    return out + "]";
  }
  if (v.is_null()) return "null";
  return jinja::py_str(v);
}

// The template's format_parameters (property declarations, sorted by name).
std::string gemma_parameters(const json& properties) {
  static const std::vector<std::string> kStandard = {"description", "type", "properties", "required", "nullable"};
  std::string out;
  bool first = true;
  for (const std::string& key : sorted_keys(properties)) {
    if (std::find(kStandard.begin(), kStandard.end(), key) != kStandard.end()) continue;
    const json& v = properties[key];
    if (!first) out += ",";
    first = false;
    out += key + ":{";
    bool comma = false;
    auto sep = [&] {
      if (comma) out += ",";
      comma = true;
    };
    if (v.is_object() && v.contains("description") && v["description"].is_string() &&
        !v["description"].get<std::string>().empty()) {
      out += "description:" + gquote(v["description"].get<std::string>());
      comma = true;
    }
    if (v.is_object() && v.value("nullable", false)) {
      sep();
      out += "nullable:true";
    }
    const std::vector<std::string> types = types_of(v);
    const std::string type = upper(types.empty() ? std::string() : types[0]);
    if (type == "STRING") {
      if (v.contains("enum") && !v["enum"].empty()) {
        sep();
        out += "enum:" + gemma_argument(v["enum"], true);
      }
    } else if (type == "OBJECT") {
      out += ",properties:{";
      if (v.contains("properties") && v["properties"].is_object()) out += gemma_parameters(v["properties"]);
      out += "}";
      if (v.contains("required") && v["required"].is_array() && !v["required"].empty()) {
        out += ",required:[";
        for (size_t i = 0; i < v["required"].size(); ++i)
          out += (i ? "," : "") + gquote(v["required"][i].is_string() ? v["required"][i].get<std::string>() : "");
        out += "]";
      }
    } else if (type == "ARRAY" && v.contains("items") && v["items"].is_object() && !v["items"].empty()) {
      out += ",items:{";
      bool item_first = true;
      for (const std::string& ik : sorted_keys(v["items"])) {
        const json& iv = v["items"][ik];
        if (iv.is_null()) continue;
        if (!item_first) out += ",";
        item_first = false;
        if (ik == "properties") {
          out += "properties:{" + (iv.is_object() ? gemma_parameters(iv) : std::string()) + "}";
        } else if (ik == "required" && iv.is_array()) {
          out += "required:[";
          for (size_t i = 0; i < iv.size(); ++i)
            out += (i ? "," : "") + gquote(iv[i].is_string() ? iv[i].get<std::string>() : "");
          out += "]";
        } else if (ik == "type") {
          if (iv.is_string()) {
            out += "type:" + gemma_argument(upper(iv.get<std::string>()), true);
          } else {
            json up = json::array();
            for (const json& t : iv) up.push_back(t.is_string() ? upper(t.get<std::string>()) : std::string());
            out += "type:" + gemma_argument(up, true);
          }
        } else {
          out += ik + ":" + gemma_argument(iv, true);
        }
      }
      out += "}";
    }
    sep();
    out += "type:" + gquote(type) + "}";
  }
  return out;
}

// A tiny reader of Gemma 4's argument notation into JSON.
struct DslReader {
  std::string_view s;
  size_t p = 0;
  bool eat(std::string_view tok) {
    if (s.substr(p, tok.size()) != tok) return false;
    p += tok.size();
    return true;
  }
  void ws() {
    while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  }
  std::optional<std::string> string() {
    if (!eat(kGemmaQuote)) return std::nullopt;
    const size_t end = s.find(kGemmaQuote, p);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s.substr(p, end - p));
    p = end + kGemmaQuote.size();
    return out;
  }
  std::optional<std::string> key() {
    ws();
    if (s.substr(p, kGemmaQuote.size()) == kGemmaQuote) return string();
    const size_t start = p;
    while (p < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[p])) || s[p] == '_' || s[p] == '-' || s[p] == '.'))
      ++p;
    if (p == start) return std::nullopt;
    return std::string(s.substr(start, p - start));
  }
  std::optional<json> object() {
    if (!eat("{")) return std::nullopt;
    json out = json::object();
    ws();
    if (eat("}")) return out;
    for (;;) {
      std::optional<std::string> k = key();
      ws();
      if (!k || !eat(":") || out.contains(*k)) return std::nullopt;
      std::optional<json> v = value();
      if (!v) return std::nullopt;
      out[*k] = std::move(*v);
      ws();
      if (eat("}")) return out;
      if (!eat(",")) return std::nullopt;
    }
  }
  std::optional<json> value(int depth = 0) {
    ws();
    if (depth > 64 || p >= s.size()) return std::nullopt;
    if (s[p] == '{') return object();
    if (s[p] == '[') {
      ++p;
      json out = json::array();
      ws();
      if (eat("]")) return out;
      for (;;) {
        std::optional<json> v = value(depth + 1);
        if (!v) return std::nullopt;
        out.push_back(std::move(*v));
        ws();
        if (eat("]")) return out;
        if (!eat(",")) return std::nullopt;
      }
    }
    if (s.substr(p, kGemmaQuote.size()) == kGemmaQuote) {
      std::optional<std::string> str = string();
      if (!str) return std::nullopt;
      return json(*str);
    }
    if (eat("true")) return json(true);
    if (eat("false")) return json(false);
    if (eat("null")) return json(nullptr);
    const size_t start = p;
    while (p < s.size() && (std::isdigit(static_cast<unsigned char>(s[p])) ||
                            std::string_view("+-.eE").find(s[p]) != std::string_view::npos))
      ++p;
    if (p == start) return std::nullopt;
    json n = json::parse(s.substr(start, p - start), nullptr, /*allow_exceptions=*/false);
    if (n.is_discarded() || !n.is_number()) return std::nullopt;
    return n;
  }
};

// The rules of any argument value (a string, number, boolean, null, object or array).
std::string gemma_value_rule(schema::GbnfBuilder& b) {
  const std::string text = text_until_rule(b, "g-text", kGemmaQuote);
  const std::string str =
      b.add_rule("g-string", schema::gbnf_literal(kGemmaQuote) + " " + text + " " + schema::gbnf_literal(kGemmaQuote));
  const std::string value = b.reserve_rule("g-value");
  const std::string key = b.add_rule("g-key", "[a-zA-Z_] [a-zA-Z0-9_.-]* | " + str);
  const std::string member = b.add_rule("g-member", key + " \":\" " + value);
  const std::string object = b.add_rule("g-object", fmt::format("\"{{\" ( {0} ( \",\" {0} )* )? \"}}\"", member));
  const std::string array = b.add_rule("g-array", fmt::format("\"[\" ( {0} ( \",\" {0} )* )? \"]\"", value));
  b.set_rule(value,
             fmt::format("{} | {} | \"true\" | \"false\" | \"null\" | {} | {}", str, b.number_rule(), object, array));
  return value;
}

}  // namespace

std::string gemma4_tools_block(const std::vector<ToolDef>& tools) {
  std::string out;
  for (const ToolDef& t : tools) {
    std::string d = "declaration:" + t.name + "{description:" + gquote(t.description);
    const json& params = t.parameters;
    if (params.is_object() && !params.empty()) {
      d += ",parameters:{";
      if (params.contains("properties") && params["properties"].is_object() && !params["properties"].empty())
        d += "properties:{" + gemma_parameters(params["properties"]) + "},";
      if (params.contains("required") && params["required"].is_array() && !params["required"].empty()) {
        d += "required:[";
        for (size_t i = 0; i < params["required"].size(); ++i)
          d += (i ? "," : "") +
               gquote(params["required"][i].is_string() ? params["required"][i].get<std::string>() : "");
        d += "],";
      }
      if (params.contains("type") && params["type"].is_string())
        d += "type:" + gquote(upper(params["type"].get<std::string>())) + "}";
    }
    d += "}";
    out += "<|tool>" + std::string(trim(d)) + "<tool|>";
  }
  return out;
}

std::string gemma4_render_call(const ChatToolCall& c) {
  std::string out = "<|tool_call>call:" + c.name + "{";
  const json args = json::parse(c.arguments.empty() ? "{}" : c.arguments, nullptr, /*allow_exceptions=*/false);
  if (args.is_object()) {
    bool first = true;
    for (const std::string& k : sorted_keys(args)) {
      if (!first) out += ",";
      first = false;
      out += k + ":" + gemma_argument(args[k], /*escape_keys=*/false);
    }
  } else {
    out += c.arguments;  // not a JSON object: the text as the client sent it (as the template does)
  }
  return out + "}<tool_call|>";
}

std::string gemma4_render_response(std::string_view name, std::string_view content) {
  return "<|tool_response>response:" + std::string(name.empty() ? "unknown" : name) + "{value:" + gquote(content) +
         "}<tool_response|>";
}

Result<std::string> gemma4_call_rule(schema::GbnfBuilder& b, const ToolDef& t) {
  const std::string any = gemma_value_rule(b);
  std::string members;  // the rule body of the arguments between the braces (empty: none)
  bool optional = true;
  const json* props = properties_of(t);
  if (props != nullptr && !props->empty()) {
    // The arguments in the template's order (sorted by name, as it renders calls), each at most
    // once, the required ones present: after[j] is what may follow once members before j are out.
    const std::vector<std::string> keys = sorted_keys(*props);
    const size_t n = keys.size();
    std::vector<std::string> member(n), after(n + 1);
    std::vector<bool> required(n);
    for (size_t j = 0; j < n; ++j) {
      const json& prop = (*props)[keys[j]];
      const std::vector<std::string> types = types_of(prop);
      const std::string type = types.size() == 1 ? types[0] : std::string();
      std::string value = any;
      if (type == "string" && all_strings(prop.value("enum", json()))) {
        value.clear();
        for (const json& e : prop["enum"])
          value += (value.empty() ? "" : " | ") + schema::gbnf_literal(gquote(e.get<std::string>()));
        value = "( " + value + " )";
      } else if (type == "string") {
        value =
            b.add_rule("g-string", schema::gbnf_literal(kGemmaQuote) + " " + text_until_rule(b, "g-text", kGemmaQuote) +
                                       " " + schema::gbnf_literal(kGemmaQuote));
      } else if (type == "integer") {
        value = b.integer_rule();
      } else if (type == "number") {
        value = b.number_rule();
      } else if (type == "boolean") {
        value = b.boolean_rule();
      }
      member[j] = schema::gbnf_literal(keys[j] + ":") + " " + value;
      required[j] = is_required(t, keys[j]);
    }
    for (size_t j = n; j-- > 0;) {
      const std::string next = after[j + 1].empty() ? "" : " " + after[j + 1];
      const std::string body = required[j] ? "\",\" " + member[j] + next : "( \",\" " + member[j] + " )?" + next;
      after[j] = b.add_rule("after-" + t.name, body);
    }
    for (size_t j = 0; j < n; ++j) {  // the first member present is j: none before it is required
      members += (members.empty() ? "" : " | ") + member[j] + (after[j + 1].empty() ? "" : " " + after[j + 1]);
      if (required[j]) {
        optional = false;
        break;
      }
    }
  } else if (props == nullptr && !t.parameters.is_null()) {
    // Free-form arguments: any names (a repeated one is not refused here, the parser rejects it).
    const std::string m = b.add_rule("g-member-any", "[a-zA-Z_] [a-zA-Z0-9_.-]* \":\" " + any);
    members = fmt::format("{0} ( \",\" {0} )*", m);
  }
  std::string body = schema::gbnf_literal("<|tool_call>call:" + t.name + "{");
  if (!members.empty())
    body += " " + (optional ? "( " + b.add_rule("members-" + t.name, members) + " )?"
                            : b.add_rule("members-" + t.name, members));
  body += " " + schema::gbnf_literal("}<tool_call|>");
  return b.add_rule("call-" + t.name, body);
}

Scan gemma4_scan_call(std::string_view text, ParsedCall& call, size_t& used) {
  const size_t close = text.find(kGemmaClose);
  if (close == std::string_view::npos) return Scan::incomplete;
  std::string_view body = text.substr(kGemmaOpen.size(), close - kGemmaOpen.size());
  constexpr std::string_view kCall = "call:";
  if (!body.starts_with(kCall)) return Scan::invalid;
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return Scan::invalid;
  const std::string name(trim(body.substr(kCall.size(), brace - kCall.size())));
  if (name.empty() || name.find_first_of(" <\n{}") != std::string::npos) return Scan::invalid;
  DslReader r{body, brace};
  std::optional<json> args = r.object();
  if (!args) return Scan::invalid;
  r.ws();
  if (r.p != body.size()) return Scan::invalid;
  call = ParsedCall{name, args->dump()};
  used = close + kGemmaClose.size();
  return Scan::complete;
}

}  // namespace edgelm::serve::native_tools
