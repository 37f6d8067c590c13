#include "common/freed_memory.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

// asgd builds on glibc (Debian, and the Ubuntu GPU hosts); without it the
// returner does nothing and these tests would fail, as they should there.
namespace asgd {
namespace {

constexpr size_t kBlock = 64 << 10;  // below malloc's mmap threshold: heap
constexpr int kBlocks = 2048;        // 128 MiB

// kBlocks blocks, written to with `fill` (resident).
std::vector<void*> Allocate(int fill) {
  std::vector<void*> blocks(kBlocks);
  for (void*& b : blocks) {
    b = std::malloc(kBlock);
    std::memset(b, fill, kBlock);
  }
  return blocks;
}

// Allocate(), then every other block freed: half of them free inside
// malloc, between blocks still in use, so that free() can not hand them
// back by shrinking the heap.
std::vector<void*> Fragment() {
  std::vector<void*> blocks = Allocate(1);
  for (int i = 0; i < kBlocks; i += 2) {
    std::free(blocks[i]);
    blocks[i] = nullptr;
  }
  return blocks;
}

void FreeAll(std::vector<void*>& blocks) {
  for (void*& b : blocks) {
    std::free(b);
    b = nullptr;
  }
}

TEST(FreedMemoryTest, ABurstIsGivenBackOnce) {
  ASSERT_GT(ResidentBytes(), 0);
  FreedMemoryReturner returner(int64_t{16} << 20);
  std::vector<void*> blocks = Fragment();
  EXPECT_GE(FreedMemoryHeld(), int64_t{60} << 20);
  const int64_t returned = returner.MaybeReturn();
  EXPECT_EQ(returner.trims(), 1);
  // 64 MiB were free; malloc keeps each free block's first page.
  EXPECT_GE(returned, int64_t{32} << 20);
  // Nothing grew since: asked again, it does not trim.
  EXPECT_EQ(returner.MaybeReturn(), 0);
  EXPECT_EQ(returner.trims(), 1);
  FreeAll(blocks);
}

// A burst still partly held at the first trim (as gRPC's backlog of reset
// calls): what it frees after that trim is given back by a later one,
// although the resident memory did not grow since.
TEST(FreedMemoryTest, WhatABurstFreesAfterATrimIsGivenBackToo) {
  FreedMemoryReturner returner(int64_t{16} << 20);
  std::vector<void*> blocks = Allocate(4);
  // A quarter freed, then trimmed.
  for (int i = 0; i < kBlocks; i += 4) {
    std::free(blocks[i]);
    blocks[i] = nullptr;
  }
  EXPECT_GE(returner.MaybeReturn(), int64_t{16} << 20);
  EXPECT_EQ(returner.trims(), 1);
  // Half more freed; every fourth block stays in use, so free() can not
  // shrink the heap and the resident memory stays where the trim left it.
  for (int i = 0; i < kBlocks; ++i) {
    if (i % 4 == 1 || i % 4 == 2) {
      std::free(blocks[i]);
      blocks[i] = nullptr;
    }
  }
  EXPECT_GE(returner.MaybeReturn(), int64_t{32} << 20);
  EXPECT_EQ(returner.trims(), 2);
  // Nothing freed since: no third trim.
  EXPECT_EQ(returner.MaybeReturn(), 0);
  EXPECT_EQ(returner.trims(), 2);
  FreeAll(blocks);
}

TEST(FreedMemoryTest, MemoryReusedStepAfterStepIsNeverTrimmed) {
  std::vector<void*> blocks = Fragment();
  FreedMemoryReturner returner(int64_t{16} << 20);
  for (int step = 0; step < 20; ++step) {
    // The freed half taken again and freed again: resident memory does not
    // grow, although 64 MiB are free in malloc after every step.
    for (int i = 0; i < kBlocks; i += 2) {
      blocks[i] = std::malloc(kBlock);
      std::memset(blocks[i], 2, kBlock);
    }
    for (int i = 0; i < kBlocks; i += 2) {
      std::free(blocks[i]);
      blocks[i] = nullptr;
    }
    EXPECT_EQ(returner.MaybeReturn(), 0) << "step " << step;
  }
  EXPECT_EQ(returner.trims(), 0);
  FreeAll(blocks);
}

TEST(FreedMemoryTest, GrowthThatIsNotFreeIsNotTrimmed) {
  FreedMemoryReturner returner(int64_t{16} << 20);
  std::vector<void*> blocks = Allocate(3);
  // 128 MiB more resident, all of it in use.
  EXPECT_EQ(returner.MaybeReturn(), 0);
  EXPECT_EQ(returner.trims(), 0);
  FreeAll(blocks);
}

}  // namespace
}  // namespace asgd
