// `edgelm loadtest --multi-turn N` (tools/loadtest_conversations.cpp): against a recording
// httplib server, every turn of a conversation carries its x-session-id and extends the previous
// prompt with its answer; against a real edgelm server, later turns reuse the KV prefix.
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "server/server_fixture.h"
#include "tools/loadtest_command.h"

namespace edgelm::tools {
namespace {

using nlohmann::json;

// Answers every streamed completion with " and X." (X: the turn count of its session) and
// records (session, prompt) in order.
class Recorder {
 public:
  Recorder() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(16); };
    svr_.Get("/health",
             [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      std::string answer;
      {
        std::lock_guard lock(mu);
        const std::string session = req.has_header("x-session-id") ? req.get_header_value("x-session-id") : "";
        turns.emplace_back(session, body.value("prompt", ""));
        answer = " and " + std::to_string(++per_session[session]) + ".";
      }
      std::string sse = "data: " + json{{"choices", {{{"text", answer}}}}}.dump() + "\n\n";
      sse +=
          "data: " +
          json{{"choices", json::array()},
               {"usage",
                {{"prompt_tokens", 10}, {"completion_tokens", 1}, {"prompt_tokens_details", {{"cached_tokens", 4}}}}}}
              .dump() +
          "\n\n";
      sse += "data: [DONE]\n\n";
      res.set_content(sse, "text/event-stream");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Recorder() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> turns;
  std::map<std::string, int> per_session;

 private:
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
};

LoadtestOptions conversation_options(const std::string& url) {
  LoadtestOptions o;
  o.url = url;
  o.multi_turn = 3;
  o.concurrency = 2;
  o.duration_s = 0.3;
  o.max_tokens = 8;
  return o;
}

TEST(LoadtestConversations, EveryTurnCarriesItsSessionAndExtendsThePreviousOne) {
  Recorder rec;
  auto r = run_loadtest(conversation_options(rec.url()));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->conversations);
  EXPECT_GE(r->conversations->completed, 2u);
  EXPECT_EQ(r->failed, 0u);
  EXPECT_EQ(r->ok, r->sent);
  EXPECT_EQ(r->conversations->ttft_first.n, r->conversations->conversations);
  EXPECT_EQ(r->conversations->later_prompt_tokens, 10 * r->conversations->ttft_later.n);
  EXPECT_EQ(r->conversations->later_cached_tokens, 4 * r->conversations->ttft_later.n);
  std::lock_guard lock(rec.mu);
  std::map<std::string, std::string> last_prompt;
  std::set<std::string> first_prompts;
  for (const auto& [session, prompt] : rec.turns) {
    ASSERT_FALSE(session.empty());
    auto it = last_prompt.find(session);
    if (it == last_prompt.end()) {
      EXPECT_TRUE(first_prompts.insert(prompt).second) << "two conversations share a first prompt: " << prompt;
    } else {
      EXPECT_EQ(prompt.rfind(it->second + " and ", 0), 0u) << "turn does not extend the previous one:\n"
                                                           << it->second << "\n->\n"
                                                           << prompt;
    }
    last_prompt[session] = prompt;
  }
  for (const auto& [session, n] : rec.per_session) EXPECT_LE(n, 3) << session;

  const std::string text = format_loadtest_text(*r);
  EXPECT_NE(text.find("TTFT turn 2+"), std::string::npos) << text;
  EXPECT_NE(text.find("prefix reuse, turns 2+: "), std::string::npos) << text;
  const json j = loadtest_json(*r);
  EXPECT_EQ(j["conversations"]["turns"], 3);
  EXPECT_EQ(j["conversations"]["session_header"], true);
}

TEST(LoadtestConversations, NoSessionIdSendsNoHeader) {
  Recorder rec;
  LoadtestOptions o = conversation_options(rec.url());
  o.session_header = false;
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::lock_guard lock(rec.mu);
  ASSERT_FALSE(rec.turns.empty());
  for (const auto& [session, prompt] : rec.turns) EXPECT_EQ(session, "");
}

TEST(LoadtestConversations, BadOptionsAreErrors) {
  Recorder rec;
  LoadtestOptions o = conversation_options(rec.url());
  o.endpoint = LoadtestEndpoint::predict;
  EXPECT_FALSE(run_loadtest(o).ok());
  o = conversation_options(rec.url());
  o.concurrency = 0;
  o.qps = 5;
  auto r = run_loadtest(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--concurrency"), std::string::npos) << r.error().message;
  o = conversation_options(rec.url());
  o.node_metrics = {"not a url"};
  EXPECT_FALSE(run_loadtest(o).ok());
}

// A real server keeps each conversation's prefix: later turns find prompt tokens cached.
TEST(LoadtestConversations, LaterTurnsReuseTheKvPrefixOfARealServer) {
  test::TestServer s;
  s.wait_ready();
  LoadtestOptions o = conversation_options("http://127.0.0.1:" + std::to_string(s.port));
  o.max_tokens = 24;
  o.node_metrics = {o.url};
  auto r = run_loadtest(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->conversations);
  EXPECT_EQ(r->failed, 0u);
  EXPECT_GT(r->conversations->ttft_later.n, 0u);
  EXPECT_GT(r->conversations->later_cached_tokens, 0u);
  EXPECT_LE(r->conversations->later_cached_tokens, r->conversations->later_prompt_tokens);
  ASSERT_EQ(r->conversations->node_prefix_hit.size(), 1u);
  ASSERT_TRUE(r->conversations->node_prefix_hit[0].second);
  EXPECT_GT(*r->conversations->node_prefix_hit[0].second, 0.0);
}

}  // namespace
}  // namespace edgelm::tools
