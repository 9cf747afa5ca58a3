// edgelm_jinja's public API: parse a Jinja chat template once, render it many times.
//
// The language is the subset of jinja2 that models' chat templates use, configured exactly as
// Hugging Face transformers configures it (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False), raise_exception,
// strftime_now, {% generation %} as a no-op block). Undefined behaves as jinja2's default
// Undefined: prints empty, is falsy and iterates empty; using its attributes is an error.
//
// Invariants: a Template is immutable and may be rendered from several threads at once; render
// is a pure function of the context and the clock in RenderOptions; raise_exception(msg) fails
// the render with RenderError{msg, raised=true}, every other error has raised=false.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "jinja/value.h"

namespace edgelm::jinja {

struct Stmt;

struct RenderOptions {
  std::optional<std::tm> now;  // strftime_now's clock; unset: the local time at the call
};

struct RenderError {
  std::string message;
  bool raised = false;  // from raise_exception(message)
};

struct RenderResult {
  std::string text;
  std::optional<RenderError> error;
  bool ok() const { return !error.has_value(); }
};

class Template {
 public:
  // Errors: "line L:C: problem".
  static Result<Template> parse(std::string_view source);

  // `context`: an object whose members are the template's variables (messages, tools,
  // add_generation_prompt, bos_token, ...), besides the globals range, dict, namespace,
  // raise_exception and strftime_now.
  RenderResult render(const json& context, const RenderOptions& opts = {}) const;

  const std::string& source() const { return *source_; }
  // Whether the source uses `name` as an identifier (e.g. "tools").
  bool mentions(std::string_view name) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
  std::shared_ptr<const std::string> source_;
};

}  // namespace edgelm::jinja
