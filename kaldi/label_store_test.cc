#include "kaldi/label_store.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

std::vector<int32_t> Labels(int n, int seed) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i * 31 + seed * 7) % 1000;
  return v;
}

// Appends 200 utterances under the given memory budget and reads each back.
void RoundTrip(int64_t budget, bool expect_spill) {
  const std::string dir = testing::MakeTempDir(::testing::TempDir(), "labels");
  LabelStore store(budget, dir);
  std::vector<LabelStore::Handle> handles;
  for (int u = 0; u < 200; ++u) {
    auto h = store.Append(Labels(100 + u * 13, u));
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
  }
  EXPECT_EQ(store.spilled(), expect_spill);
  if (expect_spill) {
    // Only the write buffer stays in memory.
    EXPECT_LE(store.memory_bytes(), 2 * 256 * 1024 * 4);
  }
  std::vector<int32_t> got;
  for (int u = 199; u >= 0; --u) {  // any order
    ASSERT_TRUE(store.Read(handles[u], &got).ok());
    ASSERT_EQ(got, Labels(100 + u * 13, u)) << u;
  }
}

TEST(LabelStoreTest, InMemory) { RoundTrip(int64_t{1} << 30, false); }

TEST(LabelStoreTest, SpillsToATemporaryFileBeyondTheBudget) {
  RoundTrip(10000, true);
}

TEST(LabelStoreTest, UnwritableTempDirIsAnError) {
  LabelStore store(0, "/proc/no-such-dir");
  EXPECT_FALSE(store.Append(std::vector<int32_t>{1, 2}).ok());
}

}  // namespace
}  // namespace asgd::kaldi
