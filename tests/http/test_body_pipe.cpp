// The bounded pipe between the IO thread and an upload handler: order, the bound, the pause and
// resume, finish and failure.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "http/body_pipe.h"

namespace edgelm::http {
namespace {

TEST(BodyPipe, CarriesEveryByteInOrderWithinTheBound) {
  std::atomic<int> resumes{0};
  BodyPipe pipe(1024, [&] { ++resumes; });
  std::string sent, got;
  std::thread producer([&] {
    for (int i = 0; i < 2000; ++i) {
      std::string piece(100, static_cast<char>('a' + i % 26));
      sent += piece;
      // A real producer stops when told to and waits for on_room; this one spins on it. The
      // count is read before the push, so a resume that comes before we start waiting counts.
      const int before = resumes.load();
      if (!pipe.push(piece.data(), piece.size()))
        while (resumes.load() == before) std::this_thread::yield();
    }
    pipe.finish();
  });
  char buf[333];
  for (;;) {
    const long n = pipe.read(buf, sizeof buf);
    ASSERT_GE(n, 0);
    if (n == 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  producer.join();
  EXPECT_EQ(got, sent);
  EXPECT_GT(resumes.load(), 0) << "200 KB through a 1 KB pipe must pause the producer";
}

TEST(BodyPipe, FailureReachesTheReader) {
  BodyPipe pipe(64, nullptr);
  ASSERT_TRUE(pipe.push("abc", 3));
  pipe.fail("timed out");
  char buf[8];
  EXPECT_EQ(pipe.read(buf, sizeof buf), 3) << "bytes that came before the failure are delivered";
  EXPECT_EQ(pipe.read(buf, sizeof buf), -1);
  EXPECT_EQ(pipe.error(), "timed out");
}

TEST(BodyPipe, AClosedReaderDropsPushes) {
  BodyPipe pipe(4, nullptr);
  EXPECT_FALSE(pipe.push("abcdef", 6)) << "over the bound: pause";
  pipe.close_reader();
  EXPECT_TRUE(pipe.reader_closed());
  EXPECT_TRUE(pipe.push("more", 4));
}

}  // namespace
}  // namespace edgelm::http
