#include "common/process_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

// asgd builds on glibc and Linux (Debian, and the Ubuntu GPU hosts): every
// figure must be known there.
namespace asgd {
namespace {

TEST(ProcessStatsTest, EveryFigureIsKnownHere) {
  const ProcessStats s = ReadProcessStats();
  EXPECT_GT(s.resident_bytes, 0);
  EXPECT_GT(s.peak_resident_bytes, 0);
  EXPECT_GT(s.heap_in_use_bytes, 0);
  EXPECT_GE(s.heap_free_bytes, 0);
  EXPECT_GE(s.threads, 1);
  EXPECT_GE(s.open_fds, 3);  // stdin, stdout, stderr
}

TEST(ProcessStatsTest, PeakResidentKeepsWhatWasTouchedAndGivenBack) {
  constexpr size_t kBytes = 64 << 20;  // mapped on its own, unmapped by free
  const ProcessStats before = ReadProcessStats();
  volatile char* block = static_cast<volatile char*>(std::malloc(kBytes));
  ASSERT_NE(block, nullptr);
  for (size_t i = 0; i < kBytes; i += 4096) block[i] = 1;  // every page
  const ProcessStats touched = ReadProcessStats();
  std::free(const_cast<char*>(block));
  const ProcessStats after = ReadProcessStats();
  const int64_t half = static_cast<int64_t>(kBytes) / 2;
  // (The kernel's counters lag by a few pages: the bounds leave room.)
  EXPECT_GE(touched.resident_bytes, before.resident_bytes + half);
  EXPECT_GE(touched.peak_resident_bytes, before.resident_bytes + half);
  // Freed: no longer resident, still the peak.
  EXPECT_LE(after.resident_bytes, touched.resident_bytes - half);
  EXPECT_GE(after.peak_resident_bytes, before.resident_bytes + half);
}

TEST(ProcessStatsTest, HeapInUseFollowsAllocationsAndFrees) {
  constexpr size_t kBlock = 64 << 10;  // in the heap, below the mmap threshold
  constexpr int kBlocks = 512;         // 32 MiB
  const int64_t before = ReadProcessStats().heap_in_use_bytes;
  std::vector<void*> blocks(kBlocks);
  for (void*& b : blocks) {
    b = std::malloc(kBlock);
    std::memset(b, 1, kBlock);
  }
  const int64_t held = ReadProcessStats().heap_in_use_bytes;
  EXPECT_GE(held - before, int64_t{kBlocks} * kBlock);
  // Every other block freed: free inside malloc, not given back, and no
  // longer in use.
  for (int i = 0; i < kBlocks; i += 2) {
    std::free(blocks[i]);
    blocks[i] = nullptr;
  }
  const ProcessStats half = ReadProcessStats();
  EXPECT_LE(held - half.heap_in_use_bytes,
            int64_t{kBlocks} * kBlock / 2 + (1 << 20));
  EXPECT_GE(held - half.heap_in_use_bytes, int64_t{kBlocks} * kBlock / 2);
  EXPECT_GE(half.heap_free_bytes, int64_t{kBlocks} * kBlock / 2);
  for (void* b : blocks) std::free(b);
  EXPECT_LE(ReadProcessStats().heap_in_use_bytes, before + (1 << 20));
}

TEST(ProcessStatsTest, CountsThreadsAndOpenFiles) {
  const ProcessStats before = ReadProcessStats();
  const int fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  absl::Notification counted;
  std::thread t([&] { counted.WaitForNotification(); });
  const ProcessStats during = ReadProcessStats();
  counted.Notify();
  t.join();
  close(fd);
  EXPECT_EQ(during.threads, before.threads + 1);
  EXPECT_EQ(during.open_fds, before.open_fds + 1);
  const ProcessStats after = ReadProcessStats();
  EXPECT_EQ(after.threads, before.threads);
  EXPECT_EQ(after.open_fds, before.open_fds);
}

}  // namespace
}  // namespace asgd
