// `edgelm convert`: llama2.c checkpoint + tokenizer.bin -> GGUF (arch llama, SentencePiece
// vocabulary), loadable by edgelm and by the reference implementation.
#include <cstdio>

#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "format/llama2c.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct ConvertOptions {
  std::string input;
  std::string tokenizer_path;
  std::string output;
  std::string name;
};

int run(const ConvertOptions& o) {
  auto probe = format::read_gguf(o.input);
  if (probe.ok()) return report_error(make_error("'{}' is already a GGUF file", o.input));
  auto file = format::read_llama2c(o.input, o.tokenizer_path);
  if (!file.ok()) return report_error(file.error());
  if (!o.name.empty()) file->metadata.set("general.name", format::GgufValue::from_string(o.name));
  if (auto st = format::write_gguf(o.output, *file); !st.ok()) return report_error(st.error());
  std::fprintf(stderr, "wrote %s: %zu tensors, %zu metadata keys\n", o.output.c_str(), file->tensors.size(),
               file->metadata.size());
  return 0;
}

}  // namespace

CommandRunner add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a llama2.c checkpoint and tokenizer.bin to GGUF");
  cmd->add_option("input", o->input, "llama2.c checkpoint (legacy export)")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin")->required();
  cmd->add_option("-o,--output", o->output, "Output GGUF path")->required();
  cmd->add_option("--name", o->name, "general.name to record in the file");
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
