// GET /admin/config's body (serve/config_view.h): every setting, secrets masked.
#include "serve/config_view.h"

#include <gtest/gtest.h>

namespace edgelm::serve {
namespace {

TEST(ConfigView, ShowsEverySettingWithItsType) {
  ServeConfig c;
  c.model_path = "/m/stories.bin";
  c.max_queue = 7;
  c.cache_threshold = 0.9;
  c.auth_metrics = true;
  c.models = {"small=/m/a.gguf,tier=small"};
  const nlohmann::json j = effective_config_json(c);
  EXPECT_EQ(j["model_path"], "/m/stories.bin");
  EXPECT_EQ(j["max_queue"], 7);
  EXPECT_EQ(j["cache_threshold"], 0.9);
  EXPECT_EQ(j["auth_metrics"], true);
  EXPECT_EQ(j["max_body_bytes"], 1 << 20);
  EXPECT_EQ(j["models"][0], "small=/m/a.gguf,tier=small");
  // As many settings as describe() prints lines.
  const std::string d = describe(c);
  EXPECT_EQ(j.size(), static_cast<size_t>(std::count(d.begin(), d.end(), '\n')));
}

TEST(ConfigView, MasksApiKeysAndTheAdminToken) {
  ServeConfig c;
  c.api_keys = {"sk-first-secret", "sk-second-secret"};
  c.admin_token = "admin-secret-token";
  const nlohmann::json j = effective_config_json(c);
  EXPECT_EQ(j["api_keys"]["count"], 2);
  EXPECT_EQ(j["api_keys"]["keys"], nlohmann::json({"****", "****"}));
  EXPECT_EQ(j["admin_token"], "****");
  const std::string text = j.dump();
  for (const char* secret : {"sk-first-secret", "sk-second-secret", "admin-secret-token"})
    EXPECT_EQ(text.find(secret), std::string::npos) << secret;
  ServeConfig none;
  EXPECT_TRUE(effective_config_json(none)["admin_token"].is_null());
  EXPECT_EQ(effective_config_json(none)["api_keys"]["count"], 0);
}

TEST(ConfigView, MasksCredentialsInUrlsButNotKeyVariableNames) {
  ServeConfig c;
  c.upstream = "cloud=https://user:hunter2@api.example.com/v1,api_key_env=CLOUD_KEY";
  const nlohmann::json j = effective_config_json(c);
  EXPECT_EQ(j["upstream"], "cloud=https://****@api.example.com/v1,api_key_env=CLOUD_KEY");
  EXPECT_EQ(mask_url_credentials("http://10.0.0.5:8080/v1"), "http://10.0.0.5:8080/v1");
  EXPECT_EQ(mask_url_credentials("a=http://u@h,b=https://x:y@k/p"), "a=http://****@h,b=https://****@k/p");
  EXPECT_EQ(mask_url_credentials("no url here"), "no url here");
}

}  // namespace
}  // namespace edgelm::serve
