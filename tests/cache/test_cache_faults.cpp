// The response cache's SQLite file under faults, with real files and real processes:
//  - a writer killed with SIGKILL at a random point leaves a file that opens, passes
//    PRAGMA integrity_check, and holds exactly the writes that committed;
//  - a file that is not a database (or a damaged one) at startup is moved aside to
//    "<db>.corrupt-<unix time>" with a warning, and a fresh file is created;
//  - a file that cannot grow (RLIMIT_FSIZE in a child, the OS refusing the write as a full disk
//    would) makes writes fail with a clear, logged, counted error while the memory cache keeps
//    serving, and leaves the earlier rows intact.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>

#include "cache/cache_store.h"
#include "cache/response_cache.h"
#include "support/test_data.h"

namespace edgelm::cache {
namespace {

namespace fs = std::filesystem;

// ---- kill -9 during writes ----

// Write number j of the writer: every fifth deletes a row written three steps earlier, the
// others insert (or replace) row "k<j>" with a 1-8 KiB answer, so rows span pages, the WAL
// fills past its checkpoint size, and auto_vacuum moves pages on deletes.
struct Op {
  bool erase;
  std::string key;
};
Op op_of(int64_t j) {
  if (j % 5 == 4) return {true, "k" + std::to_string(j - 3)};
  return {false, "k" + std::to_string(j)};
}
std::string response_of(const std::string& key) {
  const size_t n = 1024 + (std::hash<std::string>{}(key) % 7168);
  std::string s(n, 'a');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + key.size()) % 26);
  return key + ":" + s;
}
CacheEntry entry_of(const std::string& key) {
  CacheEntry e;
  e.key = key;
  e.sem_ns = "ns";
  e.query = "query " + key;
  e.response = response_of(key);
  e.finish_reason = "stop";
  e.prompt_tokens = 5;
  e.completion_tokens = 7;
  e.created_s = 1000;
  e.vector = {0.5f, -0.25f, 1.0f};
  e.embedder = "lexical";
  return e;
}
void apply(std::map<std::string, std::string>& state, int64_t j) {
  const Op op = op_of(j);
  if (op.erase)
    state.erase(op.key);
  else
    state[op.key] = response_of(op.key);
}

// The child: opens the file and runs writes first, first+1, ... reporting each committed one
// (its index, 8 bytes) on `fd` after the commit returned. Never returns.
[[noreturn]] void writer_child(const std::string& db, int64_t first, int fd) {
  std::string warning;
  auto store = CacheStore::open(db, warning);
  if (!store.ok() || !warning.empty()) _exit(2);
  for (int64_t j = first; j < first + 1000000; ++j) {
    const Op op = op_of(j);
    const Status st = op.erase ? (*store)->erase(op.key) : (*store)->put(entry_of(op.key));
    if (!st.ok()) _exit(3);
    if (write(fd, &j, sizeof j) != sizeof j) _exit(4);
  }
  _exit(0);
}

TEST(CacheStoreFaults, KillNineDuringWritesLeavesAnIntactFileWithTheCommittedWrites) {
  test::TempDir dir;
  const std::string db = dir.file("cache.db");
  std::mt19937 rng(std::random_device{}());
  std::map<std::string, std::string> state;  // what the file must hold: every committed write
  int64_t next = 0;                          // the next write's index
  for (int round = 0; round < 6; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      writer_child(db, next, fds[1]);
    }
    close(fds[1]);
    // Kill once the child has reported `target` commits: it is then in the middle of a later
    // write (or of a WAL checkpoint), at a point that differs from run to run.
    const int64_t target = std::uniform_int_distribution<int64_t>(20, 600)(rng);
    int64_t last = next - 1, got = 0;
    while (got < target && read(fds[0], &last, sizeof last) == sizeof last) ++got;
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself, code " << WEXITSTATUS(status);
    while (read(fds[0], &last, sizeof last) == sizeof last) ++got;  // reports still in the pipe
    close(fds[0]);
    ASSERT_GE(got, target);
    for (int64_t j = next; j <= last; ++j) apply(state, j);
    // The write after the last reported one may have committed before the kill, or not.
    std::map<std::string, std::string> with_next = state;
    apply(with_next, last + 1);

    std::string warning;
    auto store = CacheStore::open(db, warning);
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_EQ(warning, "") << "round " << round;  // not moved aside as corrupt
    const Status check = (*store)->integrity_check();
    ASSERT_TRUE(check.ok()) << "round " << round << ": " << check.error().message;
    auto rows = (*store)->load_all();
    ASSERT_TRUE(rows.ok()) << rows.error().message;
    std::map<std::string, std::string> found;
    for (const CacheEntry& e : *rows) {
      found[e.key] = e.response;
      EXPECT_EQ(e.query, "query " + e.key);
      EXPECT_EQ(e.vector, (std::vector<float>{0.5f, -0.25f, 1.0f}));
    }
    ASSERT_TRUE(found == state || found == with_next)
        << "round " << round << ": " << found.size() << " rows, expected " << state.size() << " (or "
        << with_next.size() << " with write " << last + 1 << ")";
    if (found == with_next && found != state) {
      state = std::move(with_next);
      ++last;
    }
    next = last + 1;
  }
  EXPECT_GT(state.size(), 0u);
}

// ---- a corrupt file at startup ----

std::vector<fs::path> moved_aside(const std::string& dir, const std::string& db_name) {
  std::vector<fs::path> out;
  const std::regex name(std::regex_replace(db_name, std::regex(R"(\.)"), R"(\.)") + R"(\.corrupt-[0-9]+)");
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), name)) out.push_back(e.path());
  return out;
}

TEST(CacheStoreFaults, GarbageAtTheDbPathIsMovedAsideAndAFreshFileCreated) {
  test::TempDir dir;
  const std::string db = dir.file("cache.db");
  std::string garbage = "not a database at all\n";
  for (int i = 0; i < 20000; ++i) garbage.push_back(static_cast<char>((i * 131) & 0xff));
  test::write_file(db, garbage);
  std::string warning;
  auto store = CacheStore::open(db, warning);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_NE(warning.find("is unusable"), std::string::npos) << warning;
  EXPECT_NE(warning.find("moved to '" + db + ".corrupt-"), std::string::npos) << warning;
  const auto aside = moved_aside(dir.path(), "cache.db");
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(test::read_file(aside[0].string()), garbage);  // kept as it was, for a post-mortem
  EXPECT_TRUE((*store)->integrity_check().ok());
  ASSERT_TRUE((*store)->put(entry_of("k1")).ok());
  auto rows = (*store)->load_all();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].response, response_of("k1"));
}

// A real cache file whose table pages were overwritten: quick_check fails at open, and it is
// moved aside like garbage.
TEST(CacheStoreFaults, DamagedDatabaseIsMovedAsideToo) {
  test::TempDir dir;
  const std::string db = dir.file("cache.db");
  {
    std::string warning;
    auto store = CacheStore::open(db, warning);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 40; ++i) ASSERT_TRUE((*store)->put(entry_of("k" + std::to_string(i))).ok());
  }
  ASSERT_FALSE(fs::exists(db + "-wal") && fs::file_size(db + "-wal") > 0) << "the close should checkpoint";
  std::string bytes = test::read_file(db);
  ASSERT_GT(bytes.size(), 8u * 4096);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 11);  // pages 2..
  test::write_file(db, bytes);
  std::string warning;
  auto store = CacheStore::open(db, warning);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_NE(warning.find("moved to"), std::string::npos) << warning;
  EXPECT_EQ(moved_aside(dir.path(), "cache.db").size(), 1u);
  auto rows = (*store)->load_all();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
}

// ---- the file cannot grow ----

CacheRequest req_of(const std::string& q) {
  CacheRequest r;
  r.ns = "ns";
  r.parts = {"model", q, "t=0"};
  r.query = q;
  return r;
}

std::unique_ptr<ResponseCache> exact_cache(const std::string& db, std::vector<std::string>& warnings) {
  CacheOptions o;
  o.mode = CacheMode::exact;
  o.db_path = db;
  auto c = ResponseCache::create(o, nullptr, warnings);
  return c.ok() ? std::move(*c) : nullptr;
}

// Child: with the file limited to its size plus 128 KiB, inserts 150 answers of 8 KiB (far
// more than fits). Each failed check is a line on `fd`.
[[noreturn]] void disk_full_child(const std::string& db, const std::string& err_path, int fd) {
  auto fail = [fd](const std::string& what) {
    const std::string line = what + "\n";
    (void)!write(fd, line.data(), line.size());
  };
  FILE* err = std::freopen(err_path.c_str(), "w", stderr);  // the log lines, for the parent
  if (err == nullptr) _exit(5);
  signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG instead of killing
  const auto limit = static_cast<rlim_t>(fs::file_size(db) + (128 << 10));
  rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(6);
  {
    std::vector<std::string> warnings;
    auto cache = exact_cache(db, warnings);
    if (!cache) _exit(7);
    if (!warnings.empty()) fail("warnings at open: " + warnings[0]);
    for (int i = 0; i < 150; ++i)
      cache->insert(req_of("new question " + std::to_string(i)), {std::string(8192, 'n'), "stop", 3, 9});
    const CacheStats s = cache->stats();
    if (s.store_errors < 10) fail("store_errors " + std::to_string(s.store_errors) + ", expected >= 10");
    if (s.store_last_error.find(db) == std::string::npos || s.store_last_error.find("full") == std::string::npos)
      fail("unclear error: '" + s.store_last_error + "'");
    // The memory cache serves everything, persisted or not, and the old entries.
    for (int i = 0; i < 150; ++i)
      if (cache->lookup(req_of("new question " + std::to_string(i))).level != CacheLevel::exact)
        fail("new entry " + std::to_string(i) + " missed");
    for (int i = 0; i < 20; ++i) {
      CacheLookup l = cache->lookup(req_of("old question " + std::to_string(i)));
      if (l.level != CacheLevel::exact || l.answer.text != "old answer " + std::to_string(i))
        fail("old entry " + std::to_string(i) + " missed");
    }
  }  // closing the file (its checkpoint may fail too)
  std::fflush(stderr);
  _exit(0);
}

TEST(CacheStoreFaults, FileThatCannotGrowIsAClearCountedErrorAndTheCacheKeepsServing) {
  test::TempDir dir;
  const std::string db = dir.file("cache.db");
  {
    std::vector<std::string> warnings;
    auto cache = exact_cache(db, warnings);
    ASSERT_NE(cache, nullptr);
    for (int i = 0; i < 20; ++i)
      cache->insert(req_of("old question " + std::to_string(i)), {"old answer " + std::to_string(i), "stop", 3, 2});
    EXPECT_EQ(cache->stats().store_errors, 0u);
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string err_path = dir.file("child.err");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    disk_full_child(db, err_path, fds[1]);
  }
  close(fds[1]);
  std::string failures;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) failures.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(failures, "");
  // Logged when it started failing, not once per failed insert.
  const std::string log = test::read_file(err_path);
  EXPECT_NE(log.find("response cache: cache file '" + db + "'"), std::string::npos) << log;
  EXPECT_NE(log.find("keeps serving from memory"), std::string::npos) << log;
  size_t n_lines = 0;
  for (size_t at = 0; (at = log.find("response cache:", at)) != std::string::npos; ++at) ++n_lines;
  EXPECT_LE(n_lines, 3u) << log;

  // Without the limit: the file is sound, the old rows are all there.
  std::string warning;
  auto store = CacheStore::open(db, warning);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(warning, "");
  const Status check = (*store)->integrity_check();
  ASSERT_TRUE(check.ok()) << check.error().message;
  auto rows = (*store)->load_all();
  ASSERT_TRUE(rows.ok());
  std::map<std::string, std::string> by_query;
  for (const CacheEntry& e : *rows) by_query[e.query] = e.response;
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(by_query["old question " + std::to_string(i)], "old answer " + std::to_string(i));
  EXPECT_LT(rows->size(), 20u + 150u);  // some of the new ones never reached the file
  store->reset();
  // And writes work again once there is room.
  std::vector<std::string> warnings;
  auto cache = exact_cache(db, warnings);
  ASSERT_NE(cache, nullptr);
  cache->insert(req_of("after"), {"room again", "stop", 1, 1});
  EXPECT_EQ(cache->stats().store_errors, 0u);
}

}  // namespace
}  // namespace edgelm::cache
