// `edgelm tokenize` and `edgelm detokenize`: text <-> token ids with a model's vocabulary.
// Only the vocabulary is loaded, so vocabulary-only GGUF files work too.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "format/model_file.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string prompt;
  std::string file;
  bool ids_only = false;
  bool no_bos = false;
  bool parse_special = false;
  std::vector<int64_t> ids;
};

Result<std::unique_ptr<tokenizer::Tokenizer>> open_tokenizer(const TokenizeOptions& o) {
  EDGELM_TRY(format::ModelFile file, format::open_model_file(o.model_path, o.tokenizer_path));
  auto tok = tokenizer::load_tokenizer(file.metadata);
  if (!tok.ok()) return make_error("{}: {}", o.model_path, tok.error().message);
  return tok;
}

int run_tokenize(const TokenizeOptions& o) {
  std::string text = o.prompt;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) return report_error(make_error("cannot read '{}'", o.file));
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto tok = open_tokenizer(o);
  if (!tok.ok()) return report_error(tok.error());
  const auto ids = (*tok)->encode(text, !o.no_bos, o.parse_special);
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (o.ids_only) {
      out += (i > 0 ? " " : "") + std::to_string(ids[i]);
    } else {
      out += std::to_string(ids[i]) + " '" + (*tok)->token_to_piece(ids[i]) + "'\n";
    }
  }
  if (o.ids_only) out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_detokenize(const TokenizeOptions& o) {
  auto tok = open_tokenizer(o);
  if (!tok.ok()) return report_error(tok.error());
  std::vector<tokenizer::TokenId> ids;
  for (const int64_t id : o.ids) {
    if (id < 0 || id >= (*tok)->vocab().n_tokens())
      return report_error(make_error("token id {} is outside the vocabulary [0, {})", id, (*tok)->vocab().n_tokens()));
    ids.push_back(static_cast<tokenizer::TokenId>(id));
  }
  const std::string text = (*tok)->decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

void add_model_options(CLI::App* cmd, TokenizeOptions& o) {
  cmd->add_option("-m,--model", o.model_path, "Model or vocabulary file (GGUF, or llama2.c with --tokenizer)")->required();
  cmd->add_option("--tokenizer", o.tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
}

}  // namespace

CommandRunner add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  add_model_options(cmd, *o);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize");
  auto* f = cmd->add_option("-f,--file", o->file, "Read the text from a file")->excludes(p);
  p->excludes(f);
  cmd->add_flag("--ids", o->ids_only, "Print only the ids, space-separated");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS/EOS");
  cmd->add_flag("--parse-special", o->parse_special, "Match control-token texts such as <s> in the input");
  cmd->callback([p, f] {
    if (p->count() == 0 && f->count() == 0) throw CLI::ValidationError("tokenize", "one of -p or -f is required");
  });
  return [o] { return run_tokenize(*o); };
}

CommandRunner add_detokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Print the text of token ids");
  add_model_options(cmd, *o);
  cmd->add_option("ids", o->ids, "Token ids")->required();
  return [o] { return run_detokenize(*o); };
}

}  // namespace edgelm::tools
