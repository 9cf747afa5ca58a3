// The KV disk tier (kv/disk_tier.h) on a real directory: round trips across reopen, crash
// leftovers, corrupt files, the LRU bound, namespaces, and a full disk (RLIMIT_FSIZE).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/xxhash64.h"
#include "kv/disk_namespace.h"
#include "kv/disk_tier.h"

namespace edgelm::kv {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("edgelm-kvdisk-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

DiskBlock make_block(uint64_t hash, uint64_t parent, int32_t seed, size_t bytes = 4096) {
  DiskBlock b;
  b.hash = hash;
  b.parent = parent;
  for (int32_t i = 0; i < 16; ++i) b.tokens.push_back(seed * 100 + i);
  b.data.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) b.data[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(seed)) & 0xff);
  return b;
}

DiskBlockKey key_of(const DiskBlock& b) {
  DiskBlockKey k{b.kind, b.hash, b.parent, b.tokens};
  k.absorbed = b.absorbed;
  return k;
}

// A recurrent-state snapshot at the end of the block (hash, parent, seed) after `absorbed` tokens.
DiskBlock make_state(uint64_t hash, uint64_t parent, int32_t seed, uint32_t absorbed, size_t bytes = 8192) {
  DiskBlock b = make_block(hash, parent, seed, bytes);
  b.kind = DiskKind::state;
  b.absorbed = absorbed;
  for (auto& x : b.data) x ^= std::byte{0x5a};  // not the KV block's bytes
  return b;
}

DiskBlockKey state_key(const DiskBlock& b, size_t after) {
  DiskBlockKey k = key_of(b);
  k.after = after;
  return k;
}

// Reads `keys` then the longest usable of `states`, and waits for the result.
DiskReadResult read_job(DiskTier& t, std::vector<DiskBlockKey> keys, std::vector<DiskBlockKey> states) {
  t.submit_read(2, std::move(keys), std::move(states));
  for (int i = 0; i < 500; ++i) {
    auto r = t.take_reads(std::chrono::milliseconds(10));
    if (!r.empty()) return std::move(r[0]);
  }
  ADD_FAILURE() << "the read did not finish";
  return {};
}

std::unique_ptr<DiskTier> open_tier(const fs::path& dir, uint64_t ns = 7, uint64_t max_bytes = 1 << 20) {
  auto t = DiskTier::open({dir.string(), max_bytes, ns});
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return std::move(t).value();
}

// Reads `keys` and waits for the result.
std::vector<DiskBlock> read_back(DiskTier& t, std::vector<DiskBlockKey> keys) {
  t.submit_read(1, std::move(keys));
  for (int i = 0; i < 500; ++i) {
    auto r = t.take_reads(std::chrono::milliseconds(10));
    if (!r.empty()) return std::move(r[0].blocks);
  }
  ADD_FAILURE() << "the read did not finish";
  return {};
}

TEST(Xxh64, KnownValues) {
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(xxh64("a", 1), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ull);
}

TEST(Xxh64, StreamingEqualsOneShot) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
  for (size_t split : {0, 1, 17, 31, 32, 33, 500, 999}) {
    Xxh64 h(5);
    h.update(data.data(), split);
    h.update(data.data() + split, data.size() - split);
    EXPECT_EQ(h.digest(), xxh64(data.data(), data.size(), 5)) << split;
  }
}

TEST(DiskTier, RoundTripAcrossReopenWithPrivateFiles) {
  TempDir d;
  const DiskBlock a = make_block(11, 1, 1), b = make_block(12, 11, 2);
  {
    auto t = open_tier(d.path);
    EXPECT_TRUE(t->enqueue_write(a));
    EXPECT_TRUE(t->enqueue_write(b));
    t->drain_writes();
    EXPECT_EQ(t->stats().writes, 2);
  }
  struct stat st {};
  ASSERT_EQ(::stat(d.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const auto& e : fs::directory_iterator(d.path)) {
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
  }
  auto t = open_tier(d.path);  // the index comes from the names alone
  EXPECT_TRUE(t->contains(11));
  EXPECT_TRUE(t->contains(12));
  EXPECT_FALSE(t->contains(13));
  const auto got = read_back(*t, {key_of(a), key_of(b)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data, a.data);
  EXPECT_EQ(got[1].tokens, b.tokens);
  EXPECT_EQ(got[1].parent, 11u);
  // Another chain under the same hash (different tokens) is not a hit.
  DiskBlockKey wrong = key_of(a);
  wrong.tokens[0] += 1;
  EXPECT_TRUE(read_back(*t, {wrong}).empty());
}

TEST(DiskTier, StateSnapshotsAreAKindOfBlockBesideTheKvBlocks) {
  TempDir d;
  const DiskBlock a = make_block(11, 1, 1), b = make_block(12, 11, 2), c = make_block(13, 12, 3);
  // Snapshots at the ends of blocks a and b (same hashes as the blocks, another kind).
  const DiskBlock sa = make_state(11, 1, 1, 16), sb = make_state(12, 11, 2, 32);
  {
    auto t = open_tier(d.path);
    for (const DiskBlock* x : {&a, &b, &c, &sa, &sb}) EXPECT_TRUE(t->enqueue_write(*x));
    t->drain_writes();
    EXPECT_EQ(t->stats().writes, 5);
    EXPECT_EQ(t->stats().state_writes, 2);
  }
  EXPECT_TRUE(fs::exists(d.path / "0000000000000007-000000000000000c.kvs"));
  for (const auto& e : fs::directory_iterator(d.path)) {
    struct stat st {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
  }
  auto t = open_tier(d.path);
  EXPECT_EQ(t->stats().state_files, 2);
  EXPECT_TRUE(t->contains(12, DiskKind::state));
  EXPECT_FALSE(t->contains(13, DiskKind::state));
  EXPECT_TRUE(t->contains(13, DiskKind::kv));
  // The longest snapshot whose chain came back.
  DiskReadResult r = read_job(*t, {key_of(a), key_of(b), key_of(c)}, {state_key(sa, 1), state_key(sb, 2)});
  ASSERT_EQ(r.blocks.size(), 3u);
  ASSERT_TRUE(r.has_state);
  EXPECT_EQ(r.state.kind, DiskKind::state);
  EXPECT_EQ(r.state.hash, 12u);
  EXPECT_EQ(r.state.absorbed, 32u);
  EXPECT_EQ(r.state.data, sb.data);
  EXPECT_EQ(r.state_after, 2u);
  // The caller holds a snapshot at key 2 already: b's (after 2) and a's are not read.
  const int64_t state_reads = t->stats().state_reads;
  t->submit_read(3, {key_of(a), key_of(b), key_of(c)}, {state_key(sa, 1), state_key(sb, 2)}, /*ram_after=*/2);
  std::vector<DiskReadResult> rs;
  for (int i = 0; i < 500 && rs.empty(); ++i) rs = t->take_reads(std::chrono::milliseconds(10));
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].blocks.size(), 3u);
  EXPECT_FALSE(rs[0].has_state);
  EXPECT_EQ(t->stats().state_reads, state_reads);
  // A snapshot whose chain did not come back is not read: b's block is asked under wrong tokens.
  DiskBlockKey wrong_b = key_of(b);
  wrong_b.tokens[3] += 1;
  r = read_job(*t, {key_of(a), wrong_b}, {state_key(sa, 1), state_key(sb, 2)});
  ASSERT_EQ(r.blocks.size(), 1u);
  ASSERT_TRUE(r.has_state);
  EXPECT_EQ(r.state.hash, 11u);
  // Another absorbed count under the same hash (another interval's layout) is not a hit.
  DiskBlockKey other = state_key(sa, 0);
  other.absorbed = 32;
  EXPECT_FALSE(read_job(*t, {}, {other}).has_state);
  // A flipped byte in the longest snapshot: skipped, counted, deleted; the shorter one serves.
  const fs::path sb_file = d.path / "0000000000000007-000000000000000c.kvs";
  {
    std::fstream io(sb_file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(300);
    const char ch = static_cast<char>(io.get());
    io.seekp(300);
    io.put(static_cast<char>(ch ^ 1));
  }
  const int64_t corrupt0 = t->stats().read_corrupt;
  r = read_job(*t, {key_of(a), key_of(b)}, {state_key(sb, 2), state_key(sa, 1)});
  ASSERT_TRUE(r.has_state);
  EXPECT_EQ(r.state.hash, 11u);
  EXPECT_EQ(t->stats().read_corrupt, corrupt0 + 1);
  EXPECT_EQ(t->stats().state_corrupt, 1);
  EXPECT_FALSE(fs::exists(sb_file));
  EXPECT_FALSE(t->contains(12, DiskKind::state));
  EXPECT_TRUE(t->contains(12, DiskKind::kv));  // the block stays
  EXPECT_EQ(t->clear(), 4);
  EXPECT_EQ(t->stats().state_files, 0);
}

TEST(DiskTier, AnotherNamespaceIsNeverRead) {
  TempDir d;
  const DiskBlock a = make_block(11, 1, 1);
  {
    auto t = open_tier(d.path, /*ns=*/7);
    t->enqueue_write(a);
    t->drain_writes();
  }
  auto t = open_tier(d.path, /*ns=*/8);
  EXPECT_FALSE(t->contains(11));
  EXPECT_TRUE(read_back(*t, {key_of(a)}).empty());
  EXPECT_EQ(t->stats().n_files, 1);  // counted against the budget all the same
}

TEST(DiskTier, FlippedByteIsSkippedCountedAndDeleted) {
  TempDir d;
  const DiskBlock a = make_block(11, 1, 1), b = make_block(12, 11, 2);
  {
    auto t = open_tier(d.path);
    t->enqueue_write(a);
    t->enqueue_write(b);
    t->drain_writes();
  }
  const fs::path victim = d.path / "0000000000000007-000000000000000c.kvb";  // b (hash 12)
  ASSERT_TRUE(fs::exists(victim));
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 16 * 4 + 100);
    f.put('\x5a' ^ static_cast<char>(b.data[100]));
  }
  auto t = open_tier(d.path);
  const auto got = read_back(*t, {key_of(a), key_of(b)});
  ASSERT_EQ(got.size(), 1u);  // a is intact, b is not used
  EXPECT_EQ(t->stats().read_corrupt, 1);
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_FALSE(t->contains(12));
}

// Reads in place (DiskBlockKey::dest): the payload lands in the caller's pieces (here three
// uneven ones, as a KV block's per-layer K/V pieces are), the result carries no data, a chain
// longer than one reader's share is read by both reader threads in order, and a flipped byte
// is caught by the checksum over the bytes in place: that block and every later one are not
// reported, the file is counted and deleted.
TEST(DiskTier, InPlaceReadsFillTheCallersPiecesAndCatchAFlippedByte) {
  TempDir d;
  constexpr int kBlocks = 24;
  std::vector<DiskBlock> chain;
  for (int i = 0; i < kBlocks; ++i) chain.push_back(make_block(100 + i, i == 0 ? 1 : 99 + i, i + 1));
  {
    auto t = open_tier(d.path, 7, 4 << 20);
    for (const DiskBlock& b : chain) ASSERT_TRUE(t->enqueue_write(b));
    t->drain_writes();
  }
  // Destinations: one buffer per block, split 1000 / 96 / 3000 bytes (4096 in all).
  std::vector<std::vector<std::byte>> mem(kBlocks, std::vector<std::byte>(4096, std::byte{0}));
  auto keys_into = [&](int n) {
    std::vector<DiskBlockKey> keys;
    for (int i = 0; i < n; ++i) {
      DiskBlockKey k = key_of(chain[static_cast<size_t>(i)]);
      std::byte* p = mem[static_cast<size_t>(i)].data();
      k.dest = {std::span<std::byte>(p, 1000), std::span<std::byte>(p + 1000, 96), std::span<std::byte>(p + 1096, 3000)};
      keys.push_back(std::move(k));
    }
    return keys;
  };
  auto t = open_tier(d.path, 7, 4 << 20);
  auto got = read_back(*t, keys_into(kBlocks));
  ASSERT_EQ(got.size(), static_cast<size_t>(kBlocks));
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)].hash, chain[static_cast<size_t>(i)].hash);
    EXPECT_EQ(got[static_cast<size_t>(i)].tokens, chain[static_cast<size_t>(i)].tokens);
    EXPECT_TRUE(got[static_cast<size_t>(i)].data.empty()) << "in place: no copy in the result";
    EXPECT_EQ(mem[static_cast<size_t>(i)], chain[static_cast<size_t>(i)].data) << i;
  }
  EXPECT_EQ(t->stats().reads, kBlocks);

  // Pieces that do not add up to the payload: a miss, and the intact file stays.
  DiskBlockKey wrong = key_of(chain[0]);
  wrong.dest = {std::span<std::byte>(mem[0].data(), 4000)};
  EXPECT_TRUE(read_back(*t, {wrong}).empty());
  EXPECT_TRUE(t->contains(100));
  EXPECT_EQ(t->stats().read_corrupt, 0);

  // A byte of block 9 flipped on disk: blocks 0..8 come back, 9 is counted and deleted.
  const fs::path victim = d.path / "0000000000000007-000000000000006d.kvb";  // hash 109
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 16 * 4 + 2000);
    f.put('\x21' ^ static_cast<char>(chain[9].data[2000]));
  }
  for (auto& m : mem) std::fill(m.begin(), m.end(), std::byte{0});
  got = read_back(*t, keys_into(kBlocks));
  ASSERT_EQ(got.size(), 9u);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(mem[static_cast<size_t>(i)], chain[static_cast<size_t>(i)].data) << i;
  EXPECT_EQ(t->stats().read_corrupt, 1);
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_FALSE(t->contains(109));
}

TEST(DiskTier, TruncatedFileAndTempLeftoversAreHandledAtOpen) {
  TempDir d;
  const DiskBlock a = make_block(11, 1, 1);
  {
    auto t = open_tier(d.path);
    t->enqueue_write(a);
    t->drain_writes();
  }
  const fs::path file = d.path / "0000000000000007-000000000000000b.kvb";
  fs::resize_file(file, fs::file_size(file) - 10);
  std::ofstream(d.path / ".tmp-999999-3") << "half a block";
  std::ofstream(d.path / "notes.txt") << "not ours";
  auto t = open_tier(d.path);
  EXPECT_EQ(t->stats().temp_removed, 1);
  EXPECT_FALSE(fs::exists(d.path / ".tmp-999999-3"));
  EXPECT_TRUE(fs::exists(d.path / "notes.txt"));  // only our names are touched
  EXPECT_TRUE(read_back(*t, {key_of(a)}).empty());
  EXPECT_EQ(t->stats().read_corrupt, 1);
}

TEST(DiskTier, LruKeepsTheDirectoryUnderItsBudget) {
  TempDir d;
  const uint64_t per_file = 64 + 16 * 4 + 4096;
  auto t = open_tier(d.path, 7, 3 * per_file);
  for (uint64_t h = 1; h <= 5; ++h) {
    t->enqueue_write(make_block(100 + h, 0, static_cast<int32_t>(h)));
    t->drain_writes();
  }
  const DiskTierStats s = t->stats();
  EXPECT_EQ(s.n_files, 3);
  EXPECT_LE(static_cast<uint64_t>(s.bytes), 3 * per_file);
  EXPECT_EQ(s.evictions, 2);
  EXPECT_FALSE(t->contains(101));
  EXPECT_TRUE(t->contains(105));
  int64_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(d.path)) on_disk += e.path().extension() == ".kvb";
  EXPECT_EQ(on_disk, 3);
}

TEST(DiskTier, FullDiskTurnsWritesOff) {
  TempDir d;
  auto t = open_tier(d.path);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 1000;  // smaller than one block file
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_TRUE(t->enqueue_write(make_block(11, 1, 1)));
  t->drain_writes();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  const DiskTierStats s = t->stats();
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.write_errors, 1);
  EXPECT_FALSE(s.disabled_reason.empty());
  EXPECT_FALSE(t->enqueue_write(make_block(12, 11, 2)));  // dropped, counted
  EXPECT_EQ(t->stats().write_drops, 1);
  for (const auto& e : fs::directory_iterator(d.path)) ADD_FAILURE() << "left behind: " << e.path();
}

TEST(DiskTier, FullQueueDropsAndCounts) {
  TempDir d;
  auto opened = DiskTier::open({d.path.string(), 1 << 20, 7, /*queue_bytes=*/5000});
  ASSERT_TRUE(opened.ok());
  auto& t = *opened;
  int accepted = 0;
  for (uint64_t h = 1; h <= 50; ++h) accepted += t->enqueue_write(make_block(h, 0, static_cast<int32_t>(h))) ? 1 : 0;
  t->drain_writes();
  const DiskTierStats s = t->stats();
  EXPECT_EQ(s.writes + s.write_drops, 50);
  EXPECT_EQ(s.writes, accepted);
}

TEST(DiskTier, ClearDeletesEveryBlockFile) {
  TempDir d;
  auto t = open_tier(d.path);
  t->enqueue_write(make_block(11, 1, 1));
  t->enqueue_write(make_block(12, 11, 2));
  EXPECT_EQ(t->clear(), 2);
  EXPECT_FALSE(t->contains(11));
  EXPECT_EQ(t->stats().bytes, 0);
}

TEST(DiskNamespace, FileHashFollowsContentAndIsRemembered) {
  TempDir d;
  fs::create_directories(d.path);
  const fs::path model = d.path / "m.bin";
  std::ofstream(model) << "weights one";
  auto h1 = file_content_hash(model.string(), d.path.string());
  ASSERT_TRUE(h1.ok());
  EXPECT_EQ(*h1, xxh64("weights one", 11));
  auto again = file_content_hash(model.string(), d.path.string());
  EXPECT_EQ(*again, *h1);
  fs::remove(model);
  ::usleep(30000);                        // past the file system's timestamp granularity
  std::ofstream(model) << "weights two";  // swapped under the same name
  auto h2 = file_content_hash(model.string(), d.path.string());
  ASSERT_TRUE(h2.ok());
  EXPECT_NE(*h2, *h1);
  EXPECT_NE(DiskNamespace().add("a", "bc").value(), DiskNamespace().add("ab", "c").value());
  EXPECT_FALSE(file_content_hash((d.path / "missing").string(), "").ok());
}

}  // namespace
}  // namespace edgelm::kv
