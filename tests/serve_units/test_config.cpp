// ServeConfig: YAML loading (keys, types, sizes, unknown keys), environment overrides and their
// precedence, API key files, validation and the secret-free description.
#include <gtest/gtest.h>

#include <map>

#include "serve/config.h"
#include "serve/model_spec.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

using test::TempDir;
using test::write_file;

// getenv over a map, as the server's std::getenv would see it.
auto env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(ServeConfig, DefaultsAreTheDocumentedOnes) {
  ServeConfig c;
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(c.port, 8080);
  EXPECT_EQ(c.kv_type, "f16");
  EXPECT_EQ(c.kv_memory, "512M");
  EXPECT_EQ(c.max_queue, 64);
  EXPECT_EQ(c.max_body_bytes, size_t{1} << 20);
  EXPECT_DOUBLE_EQ(c.drain_timeout_s, 30);
  EXPECT_FALSE(c.auth_health);
}

TEST(ServeConfig, LoadsEveryKindOfField) {
  TempDir dir;
  write_file(dir.file("c.yaml"),
             "model_path: /models/qwen.gguf\n"
             "host: 0.0.0.0\n"
             "port: 9000\n"
             "threads: 4\n"
             "kv_type: q8_0\n"
             "kv_memory: 1G\n"
             "target_step_ms: 120.5\n"
             "state_snapshot_interval: 4\n"
             "max_body_bytes: 2M\n"
             "api_keys: [alpha, beta]\n"
             "admin_token: s3cret\n"
             "auth_metrics: true\n"
             "drain_timeout_s: 5\n"
             "header_timeout_s: 2.5\n"
             "stream_buffer_bytes: 64K\n"
             "prefix_cache_scope: global\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->model_path, "/models/qwen.gguf");
  EXPECT_EQ(c->host, "0.0.0.0");
  EXPECT_EQ(c->port, 9000);
  EXPECT_EQ(c->threads, 4);
  EXPECT_EQ(c->kv_type, "q8_0");
  EXPECT_EQ(c->kv_memory, "1G");
  EXPECT_DOUBLE_EQ(c->target_step_ms, 120.5);
  EXPECT_EQ(c->state_snapshot_interval, 4);
  EXPECT_EQ(c->max_body_bytes, size_t{2} << 20);
  EXPECT_EQ(c->api_keys, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(c->admin_token, "s3cret");
  EXPECT_TRUE(c->auth_metrics);
  EXPECT_FALSE(c->auth_health);
  EXPECT_DOUBLE_EQ(c->drain_timeout_s, 5);
  EXPECT_DOUBLE_EQ(c->header_timeout_s, 2.5);
  EXPECT_EQ(c->stream_buffer_bytes, size_t{64} << 10);
  EXPECT_EQ(c->prefix_cache_scope, "global");
  // Untouched fields keep the base's values.
  EXPECT_EQ(c->max_queue, 64);
}

TEST(ServeConfig, FileOnlyOverridesWhatItSets) {
  TempDir dir;
  write_file(dir.file("c.yaml"), "port: 1234\n");
  ServeConfig base;
  base.model_path = "m.gguf";
  base.max_queue = 7;
  auto c = load_config_file(dir.file("c.yaml"), base);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->model_path, "m.gguf");
  EXPECT_EQ(c->max_queue, 7);
  EXPECT_EQ(c->port, 1234);
}

TEST(ServeConfig, EmptyFileIsNoChange) {
  TempDir dir;
  write_file(dir.file("c.yaml"), "# nothing here\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->port, 8080);
}

TEST(ServeConfig, UnknownKeyIsAnErrorNamingIt) {
  TempDir dir;
  write_file(dir.file("c.yaml"), "port: 80\nmax_qeueu: 3\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("unknown key 'max_qeueu'"), std::string::npos) << c.error().message;
}

TEST(ServeConfig, WrongTypeIsAnErrorNamingTheKey) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"port: eighty\n", "'port'"},
      {"threads: 2.5\n", "'threads'"},
      {"target_step_ms: fast\n", "'target_step_ms'"},
      {"state_snapshot_interval: 2.5\n", "'state_snapshot_interval'"},
      {"auth_health: maybe\n", "'auth_health'"},
      {"max_body_bytes: lots\n", "'max_body_bytes'"},
      {"host: [a, b]\n", "'host'"},
      {"api_keys: {a: 1}\n", "'api_keys'"},
      {"port:\n", "'port'"},
  };
  for (const auto& [yaml, key] : cases) {
    write_file(dir.file("c.yaml"), yaml);
    auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.error().message.find(key), std::string::npos) << yaml << " -> " << c.error().message;
  }
}

TEST(ServeConfig, SyntaxErrorsAndMissingFilesAreErrors) {
  TempDir dir;
  write_file(dir.file("bad.yaml"), "port: 80\n  host: [unclosed\n");
  auto bad = load_config_file(dir.file("bad.yaml"), ServeConfig{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line"), std::string::npos) << bad.error().message;
  write_file(dir.file("list.yaml"), "- a\n- b\n");
  EXPECT_FALSE(load_config_file(dir.file("list.yaml"), ServeConfig{}).ok());
  auto missing = load_config_file(dir.file("nope.yaml"), ServeConfig{});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope.yaml"), std::string::npos);
}

TEST(ServeConfig, ApiKeyFileFromYamlIsRelativeToTheYaml) {
  TempDir dir;
  write_file(dir.file("keys.txt"), "# operators\nkey-one\n\n  key-two  \n#key-three\n");
  write_file(dir.file("c.yaml"), "api_keys: [inline]\napi_key_file: keys.txt\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->api_keys, (std::vector<std::string>{"inline", "key-one", "key-two"}));
}

TEST(ServeConfig, ApiKeyFileErrors) {
  TempDir dir;
  ServeConfig c;
  EXPECT_FALSE(load_api_key_file(c, dir.file("missing.txt")).ok());
  write_file(dir.file("empty.txt"), "# only comments\n\n");
  auto st = load_api_key_file(c, dir.file("empty.txt"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("no keys"), std::string::npos);
}

TEST(ServeConfig, EnvironmentOverridesTheFile) {
  TempDir dir;
  write_file(dir.file("c.yaml"), "model_path: from-file.gguf\nport: 9000\nmax_queue: 10\napi_keys: [file-key]\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok());
  auto st = apply_env(*c, env_of({{"EDGELM_MODEL", "from-env.gguf"},
                                  {"EDGELM_PORT", "9100"},
                                  {"EDGELM_API_KEYS", " k1, k2 ,,k3 "},
                                  {"EDGELM_ADMIN_TOKEN", "adm"},
                                  {"EDGELM_KV_MEMORY", "256M"},
                                  {"EDGELM_KV_TYPE", "f32"},
                                  {"EDGELM_THREADS", "3"},
                                  {"EDGELM_DEVICE_ID", "pi-5"},
                                  {"EDGELM_MODEL_NAME", "qwen"},
                                  {"EDGELM_AUTH_HEALTH", "yes"},
                                  {"EDGELM_DRAIN_TIMEOUT_S", "2.5"},
                                  {"EDGELM_MAX_QUEUE", ""}}));  // empty: unset
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(c->model_path, "from-env.gguf");
  EXPECT_EQ(c->port, 9100);
  EXPECT_EQ(c->max_queue, 10);
  EXPECT_EQ(c->api_keys, (std::vector<std::string>{"k1", "k2", "k3"}));
  EXPECT_EQ(c->admin_token, "adm");
  EXPECT_EQ(c->kv_memory, "256M");
  EXPECT_EQ(c->kv_type, "f32");
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->device_id, "pi-5");
  EXPECT_EQ(c->model_name, "qwen");
  EXPECT_TRUE(c->auth_health);
  EXPECT_DOUBLE_EQ(c->drain_timeout_s, 2.5);
}

// no_mmap: off by default; the YAML key, EDGELM_NO_MMAP and a bad value naming the key.
TEST(ServeConfig, NoMmapFromYamlAndEnvironment) {
  EXPECT_FALSE(ServeConfig{}.no_mmap);
  TempDir dir;
  write_file(dir.file("c.yaml"), "model_path: m.gguf\nno_mmap: true\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->no_mmap);
  EXPECT_NE(describe(*c).find("no_mmap: true\n"), std::string::npos) << describe(*c);
  ASSERT_TRUE(apply_env(*c, env_of({{"EDGELM_NO_MMAP", "off"}})).ok());
  EXPECT_FALSE(c->no_mmap);
  ASSERT_TRUE(apply_env(*c, env_of({{"EDGELM_NO_MMAP", "1"}})).ok());
  EXPECT_TRUE(c->no_mmap);
  EXPECT_TRUE(validate(*c).ok());
  auto bad = apply_env(*c, env_of({{"EDGELM_NO_MMAP", "sometimes"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("EDGELM_NO_MMAP"), std::string::npos) << bad.error().message;
  write_file(dir.file("bad.yaml"), "no_mmap: maybe\n");
  auto bad_yaml = load_config_file(dir.file("bad.yaml"), ServeConfig{});
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_NE(bad_yaml.error().message.find("'no_mmap'"), std::string::npos) << bad_yaml.error().message;
}

TEST(ServeConfig, LongEnvironmentNamesWorkToo) {
  ServeConfig c;
  ASSERT_TRUE(apply_env(c, env_of({{"EDGELM_MODEL_PATH", "a.gguf"}, {"EDGELM_MAX_BODY_BYTES", "64K"}})).ok());
  EXPECT_EQ(c.model_path, "a.gguf");
  EXPECT_EQ(c.max_body_bytes, size_t{64} << 10);
}

TEST(ServeConfig, BadEnvironmentValueNamesTheVariable) {
  ServeConfig c;
  auto st = apply_env(c, env_of({{"EDGELM_PORT", "80x"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("EDGELM_PORT"), std::string::npos) << st.error().message;
}

// `mutate` applied to the valid `c` must fail validation with a message containing `needle`.
template <typename Mutate>
void expect_invalid(const ServeConfig& c, Mutate mutate, const char* needle) {
  ServeConfig x = c;
  mutate(x);
  auto st = validate(x);
  ASSERT_FALSE(st.ok()) << needle;
  EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
}

TEST(ServeConfig, Validate) {
  ServeConfig c;
  EXPECT_FALSE(validate(c).ok());  // no model
  c.model_path = "m.gguf";
  EXPECT_TRUE(validate(c).ok());
  auto bad = [&](auto mutate, const char* needle) { expect_invalid(c, mutate, needle); };
  bad([](ServeConfig& x) { x.port = 70000; }, "port");
  bad([](ServeConfig& x) { x.header_timeout_s = 0; }, "header_timeout_s");
  bad([](ServeConfig& x) { x.write_timeout_s = -1; }, "write_timeout_s");
  bad([](ServeConfig& x) { x.stream_buffer_bytes = 100; }, "stream_buffer_bytes");
  bad([](ServeConfig& x) { x.prefix_cache_scope = "tenant"; }, "prefix_cache_scope");
  bad([](ServeConfig& x) { x.kv_type = "q4_0"; }, "kv_type");
  bad([](ServeConfig& x) { x.kv_memory = "lots"; }, "kv_memory");
  bad([](ServeConfig& x) { x.max_batch_size = 0; }, "max_batch_size");
  bad([](ServeConfig& x) { x.max_queue = 0; }, "max_queue");
  bad([](ServeConfig& x) { x.threads = -1; }, "threads");
  bad([](ServeConfig& x) { x.api_keys = {"has space"}; }, "api_keys");
  bad([](ServeConfig& x) { x.drain_timeout_s = -1; }, "drain_timeout_s");
  bad([](ServeConfig& x) { x.kv_disk_size = "big"; }, "kv_disk_size");
  bad(
      [](ServeConfig& x) {
        x.kv_disk = "/var/cache/edgelm-kv";
        x.kv_disk_size = "1000";
      },
      "kv_disk_size");
}

TEST(ServeConfig, SpeculativeDecodingKeys) {
  ServeConfig c;
  EXPECT_EQ(c.spec, "off");
  EXPECT_EQ(c.draft_max, 8);
  EXPECT_EQ(c.draft_min, 0);
  TempDir dir;
  write_file(dir.file("c.yaml"),
             "model_path: /m/big.gguf\nspec: ngram:4\ndraft_model: /m/small.gguf\ndraft_quant: q4_0\n"
             "draft_max: 6\ndraft_min: 2\ndraft: mtp\n");
  auto f = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->spec, "ngram:4");
  EXPECT_EQ(f->draft_model, "/m/small.gguf");
  EXPECT_EQ(f->draft_quant, "q4_0");
  EXPECT_EQ(f->draft_max, 6);
  EXPECT_EQ(f->draft_min, 2);
  EXPECT_EQ(f->draft, "mtp");
  // The environment overrides the file.
  ASSERT_TRUE(apply_env(*f, env_of({{"EDGELM_SPEC", "off"},
                                    {"EDGELM_DRAFT_MODEL", "/m/other.gguf"},
                                    {"EDGELM_DRAFT_QUANT", ""},
                                    {"EDGELM_DRAFT_MAX", "3"},
                                    {"EDGELM_DRAFT_MIN", "1"}}))
                  .ok());
  EXPECT_EQ(f->spec, "off");
  EXPECT_EQ(f->draft_model, "/m/other.gguf");
  EXPECT_EQ(f->draft_quant, "q4_0");  // empty: unset
  EXPECT_EQ(f->draft_max, 3);
  EXPECT_EQ(f->draft_min, 1);
  auto st = apply_env(*f, env_of({{"EDGELM_DRAFT_MAX", "many"}}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("EDGELM_DRAFT_MAX"), std::string::npos) << st.error().message;
}

TEST(ServeConfig, ValidateSpeculativeDecoding) {
  ServeConfig c;
  c.model_path = "m.gguf";
  c.spec = "ngram:3";
  EXPECT_TRUE(validate(c).ok());
  c.spec = "off";
  c.draft_quant = "q4_0";
  EXPECT_TRUE(validate(c).ok());
  auto bad = [&](auto mutate, const char* needle) { expect_invalid(c, mutate, needle); };
  bad([](ServeConfig& x) { x.spec = "lookahead"; }, "spec");
  bad([](ServeConfig& x) { x.spec = "ngram"; }, "exclude");
  bad([](ServeConfig& x) { x.draft_model = "d.gguf"; }, "exclude");
  bad([](ServeConfig& x) { x.draft_max = 0; }, "draft-max");
  bad([](ServeConfig& x) { x.draft_min = 9; }, "draft-min");
  // The MTP head: draft mtp or spec mtp, alone.
  ServeConfig mtp;
  mtp.model_path = "m.gguf";
  mtp.draft = "mtp";
  EXPECT_TRUE(validate(mtp).ok());
  mtp.draft.clear();
  mtp.spec = "mtp";
  EXPECT_TRUE(validate(mtp).ok());
  auto bad_mtp = [&](auto mutate, const char* needle) { expect_invalid(mtp, mutate, needle); };
  bad_mtp([](ServeConfig& x) { x.draft = "eagle"; }, "draft");
  bad_mtp([](ServeConfig& x) { x.draft_quant = "q4_0"; }, "excludes");
  bad_mtp([](ServeConfig& x) { x.draft = "mtp", x.spec = "ngram"; }, "excludes");
}

TEST(ServeConfig, ModelSpecs) {
  auto m = parse_model_spec("tiny=/m/stories.bin,tier=small,tokenizer=/m/tok.bin,profile=/p/tiny.json,dyn_temp=0.3:64:512");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->name, "tiny");
  EXPECT_EQ(m->path, "/m/stories.bin");
  EXPECT_EQ(m->tier, Tier::small);
  EXPECT_EQ(m->tokenizer_path, "/m/tok.bin");
  EXPECT_EQ(m->profile_path, "/p/tiny.json");
  ASSERT_TRUE(m->dyn_temp.has_value());
  EXPECT_TRUE(m->dyn_temp->enabled);
  EXPECT_FLOAT_EQ(m->dyn_temp->min_temperature, 0.3f);
  EXPECT_EQ(m->dyn_temp->start_tokens, 64);
  EXPECT_EQ(m->dyn_temp->full_tokens, 512);
  m = parse_model_spec("big=/m/a=b.gguf,tier=large");  // '=' inside the path is kept
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->path, "/m/a=b.gguf");
  EXPECT_EQ(m->tier, Tier::large);
  EXPECT_FALSE(m->dyn_temp.has_value());
  EXPECT_TRUE(looks_like_model_spec("a=/m/x.gguf"));
  EXPECT_FALSE(looks_like_model_spec("/m/x.gguf"));
  EXPECT_FALSE(looks_like_model_spec("/m/x,y=z.gguf"));
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"/m/x.gguf", "NAME=PATH"},
           {"=x.gguf", "NAME=PATH"},
           {"a=x.gguf,tier=huge", "tier"},
           {"a=x.gguf,color=red", "unknown key 'color'"},
           {"a=x.gguf,tier", "KEY=VALUE"},
           {"auto=x.gguf", "reserved"},
           {"a=x.gguf,dyn_temp=0.2:256", "MIN:START:FULL"},
           {"a=x.gguf,dyn_temp=0.2:300:100", "START < FULL"},
           {"a=x.gguf,dyn_temp=cold:1:2", "not a number"}}) {
    auto r = parse_model_spec(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  }
}

TEST(ServeConfig, SeveralModelsUpstreamAndBudgets) {
  TempDir dir;
  write_file(dir.file("c.yaml"),
             "models:\n  - small=/m/s.bin,tier=small\n  - large=/m/l.gguf,tier=large,profile=/p/l.json\n"
             "upstream: cloud=http://10.0.0.5:8080,api_key_env=CLOUD_KEY\ndefault_budget_ms: 2000\n"
             "startup_profile: \"off\"\nstartup_profile_budget_s: 45\nmemory_budget: 4G\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->models.size(), 2u);
  EXPECT_EQ(c->upstream, "cloud=http://10.0.0.5:8080,api_key_env=CLOUD_KEY");
  EXPECT_DOUBLE_EQ(c->default_budget_ms, 2000);
  EXPECT_EQ(c->startup_profile, "off");
  EXPECT_DOUBLE_EQ(c->startup_profile_budget_s, 45);
  EXPECT_DOUBLE_EQ(ServeConfig{}.startup_profile_budget_s, 20);
  ServeConfig from_env;
  ASSERT_TRUE(apply_env(from_env, env_of({{"EDGELM_STARTUP_PROFILE_BUDGET_S", "7.5"}})).ok());
  EXPECT_DOUBLE_EQ(from_env.startup_profile_budget_s, 7.5);
  ASSERT_TRUE(validate(*c).ok()) << validate(*c).error().message;
  EXPECT_EQ(*memory_budget_bytes(*c), size_t{4} << 30);
  auto specs = model_specs(*c);
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ((*specs)[1].name, "large");
  EXPECT_EQ((*specs)[1].profile_path, "/p/l.json");
  EXPECT_NE(describe(*c).find("models: small=/m/s.bin,tier=small; large="), std::string::npos) << describe(*c);
  // EDGELM_MODELS separates specs with ';' (they contain commas).
  ServeConfig e;
  ASSERT_TRUE(apply_env(e, env_of({{"EDGELM_MODELS", "a=/m/a.bin,tier=small; b=/m/b.gguf,tier=medium"}})).ok());
  EXPECT_EQ(e.models, (std::vector<std::string>{"a=/m/a.bin,tier=small", "b=/m/b.gguf,tier=medium"}));
  // One model: model_path, named model_name, the small tier.
  ServeConfig one;
  one.model_path = "/m/one.gguf";
  fill_derived_defaults(one);
  auto single = model_specs(one);
  ASSERT_TRUE(single.ok());
  ASSERT_EQ(single->size(), 1u);
  EXPECT_EQ((*single)[0].name, "one");
  EXPECT_EQ((*single)[0].tier, Tier::small);
  EXPECT_EQ(*memory_budget_bytes(one), 0u);

  auto bad = [&](auto mutate, const char* needle) { expect_invalid(*c, mutate, needle); };
  bad([](ServeConfig& x) { x.model_path = "/m/x.gguf"; }, "not both");
  bad([](ServeConfig& x) { x.models.push_back("small=/m/t.bin"); }, "used twice");
  bad([](ServeConfig& x) { x.models.push_back("/m/t.bin"); }, "NAME=PATH");
  bad([](ServeConfig& x) { x.upstream = "cloud"; }, "upstream");
  bad([](ServeConfig& x) { x.upstream = "small=http://h:1"; }, "both named 'small'");
  bad([](ServeConfig& x) { x.default_budget_ms = 0; }, "default_budget_ms");
  bad([](ServeConfig& x) { x.startup_profile = "full"; }, "startup_profile");
  bad([](ServeConfig& x) { x.startup_profile_budget_s = -1; }, "startup_profile_budget_s");
  bad([](ServeConfig& x) { x.memory_budget = "lots"; }, "memory_budget");
  bad([](ServeConfig& x) { x.models.clear(); }, "no model");
}

TEST(ServeConfig, DescribeMasksSecrets) {
  ServeConfig c;
  c.model_path = "/m/tiny.gguf";
  c.api_keys = {"secret-a", "secret-b"};
  c.admin_token = "top-secret";
  const std::string d = describe(c);
  EXPECT_EQ(d.find("secret-a"), std::string::npos);
  EXPECT_EQ(d.find("top-secret"), std::string::npos);
  EXPECT_NE(d.find("api_keys: **** (2 keys)\n"), std::string::npos) << d;
  EXPECT_NE(d.find("admin_token: **** (1 token)\n"), std::string::npos) << d;
  EXPECT_NE(d.find("model_path: /m/tiny.gguf\n"), std::string::npos);
  EXPECT_NE(d.find("port: 8080\n"), std::string::npos);
  EXPECT_NE(d.find("auth_health: false\n"), std::string::npos);
  // One line per setting.
  EXPECT_EQ(std::count(d.begin(), d.end(), '\n'), 77);
  EXPECT_NE(d.find("pooling: (none)\nembed_batch_tokens: 8192\n"), std::string::npos) << d;
  EXPECT_NE(d.find("state_snapshot_interval: 16\nkv_disk: (none)\nkv_disk_size: 2G\n"), std::string::npos) << d;
  EXPECT_NE(d.find("mmproj: (none)\nimage_max_pixels: 50000000\nmax_images_per_request: 8\nimage_cache: 16\n"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("media_path: (none)\nallow_image_urls: false\nimage_url_timeout_s: 10\nimage_url_allow_cidr: "),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("cache_guards: all\ncache_max_error_rate: 0.01\ncache_wordnet_dir: /usr/share/wordnet\n"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("startup_profile: quick\nstartup_profile_budget_s: 20\n"), std::string::npos) << d;
  EXPECT_NE(d.find("no_mmap: false\n"), std::string::npos) << d;
  EXPECT_NE(d.find("spec: off\ndraft: (none)\ndraft_model: (none)\ndraft_quant: (none)\ndraft_max: 8\ndraft_min: 0\n"),
            std::string::npos)
      << d;
  ServeConfig none;
  EXPECT_NE(describe(none).find("api_keys: (none)\n"), std::string::npos);
}

TEST(ServeConfig, DerivedDefaults) {
  ServeConfig c;
  c.model_path = "/models/qwen2-0.5b-q4_0.gguf";
  fill_derived_defaults(c);
  EXPECT_EQ(c.model_name, "qwen2-0.5b-q4_0");
  EXPECT_EQ(c.device_id, default_device_id());
  EXPECT_FALSE(c.device_id.empty());
  c.model_name = "custom";
  fill_derived_defaults(c);
  EXPECT_EQ(c.model_name, "custom");
}

}  // namespace
}  // namespace edgelm::serve

namespace edgelm::serve {
namespace {

TEST(ServeConfig, ImageSettings) {
  ServeConfig c;
  c.model_path = "/m/gemma3.gguf";
  ASSERT_TRUE(apply_env(c, [](const char* name) -> const char* {
                if (std::string_view(name) == "EDGELM_MMPROJ") return "/m/mmproj.gguf";
                if (std::string_view(name) == "EDGELM_MAX_IMAGES_PER_REQUEST") return "2";
                return nullptr;
              }).ok());
  EXPECT_EQ(c.mmproj, "/m/mmproj.gguf");
  EXPECT_EQ(c.max_images_per_request, 2);
  EXPECT_TRUE(validate(c).ok());
  for (auto bad : {&ServeConfig::image_max_pixels, &ServeConfig::max_images_per_request}) {
    ServeConfig b = c;
    b.*bad = 0;
    auto st = validate(b);
    ASSERT_FALSE(st.ok());
  }
  ServeConfig b = c;
  b.image_cache = -1;
  EXPECT_NE(validate(b).error().message.find("image_cache"), std::string::npos);
  b = c;
  b.image_url_timeout_s = 0;
  EXPECT_NE(validate(b).error().message.find("image_url_timeout_s"), std::string::npos);
}

TEST(ServeConfig, ImageSourceKeys) {
  TempDir dir;
  write_file(dir.file("c.yaml"),
             "model_path: /m/gemma3.gguf\n"
             "media_path: /srv/media\n"
             "allow_image_urls: true\n"
             "image_url_timeout_s: 2.5\n"
             "image_url_allow_cidr: [192.168.1.0/24, 10.0.0.7/32]\n"
             "image_max_bytes: 4M\n");
  auto c = load_config_file(dir.file("c.yaml"), ServeConfig{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->media_path, "/srv/media");
  EXPECT_TRUE(c->allow_image_urls);
  EXPECT_DOUBLE_EQ(c->image_url_timeout_s, 2.5);
  EXPECT_EQ(c->image_url_allow_cidr, (std::vector<std::string>{"192.168.1.0/24", "10.0.0.7/32"}));
  EXPECT_EQ(c->image_max_bytes, size_t{4} << 20);
  const ServeConfig defaults;
  EXPECT_FALSE(defaults.allow_image_urls);
  EXPECT_TRUE(defaults.media_path.empty());
  EXPECT_DOUBLE_EQ(defaults.image_url_timeout_s, 10);
}

}  // namespace
}  // namespace edgelm::serve
