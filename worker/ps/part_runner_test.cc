// PartRunner: every part runs exactly once per Run, on distinct threads, and
// Run returns only after all of them (their writes are visible); Split tiles
// [0, n) into nearly equal parts.
#include "worker/ps/part_runner.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(PartRunnerTest, EachPartRunsOnceOnItsOwnThreadAndRunWaitsForAll) {
  for (int parts : {1, 2, 5}) {
    SCOPED_TRACE(parts);
    PartRunner runner(parts);
    EXPECT_EQ(runner.parts(), parts);
    for (int round = 0; round < 50; ++round) {
      std::vector<int> calls(parts, 0);  // plain ints: Run must publish them
      absl::Mutex mu;
      std::set<std::thread::id> threads;
      runner.Run([&](int part) {
        ++calls[part];
        absl::MutexLock lock(&mu);
        threads.insert(std::this_thread::get_id());
      });
      for (int p = 0; p < parts; ++p) EXPECT_EQ(calls[p], 1) << "part " << p;
      EXPECT_EQ(threads.size(), static_cast<size_t>(parts));
      EXPECT_EQ(threads.count(std::this_thread::get_id()), 1u);  // part 0
    }
  }
}

TEST(PartRunnerTest, FewerThanOnePartMeansOne) {
  PartRunner runner(0);
  EXPECT_EQ(runner.parts(), 1);
  int calls = 0;
  runner.Run([&](int part) {
    EXPECT_EQ(part, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(PartRunnerTest, SplitTilesTheRangeInNearlyEqualParts) {
  for (int64_t n : {0, 1, 7, 48, 1000003}) {
    for (int parts : {1, 3, 4, 16}) {
      int64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        int64_t begin, end;
        PartRunner::Split(n, parts, p, &begin, &end);
        EXPECT_EQ(begin, next) << n << " in " << parts;
        EXPECT_GE(end - begin, n / parts);
        EXPECT_LE(end - begin, n / parts + 1);
        next = end;
      }
      EXPECT_EQ(next, n) << n << " in " << parts;
    }
  }
}

}  // namespace
}  // namespace asgd
