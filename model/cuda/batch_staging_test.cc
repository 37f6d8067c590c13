#include "model/cuda/batch_staging.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "model/backend.h"

namespace asgd {
namespace cuda {
namespace {

// A batch's memory, as a training loop's minibatch buffers hold it.
struct Buffer {
  explicit Buffer(int rows) : inputs(rows * 3, 0.5f), labels(rows, 1) {}
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  Batch view() const {
    return Batch{static_cast<int>(labels.size()), 1, inputs, labels};
  }
};

TEST(BatchStagingTest, WithoutAnnouncementsEveryCallUploadsIntoSlotZero) {
  BatchStaging staging;
  Buffer a(4), b(4);
  for (const Buffer* buffer : {&a, &b, &a}) {
    const BatchStaging::Use use = staging.Begin(buffer->view());
    EXPECT_EQ(use.slot, 0);
    EXPECT_TRUE(use.upload);
    int slot = -1;
    EXPECT_FALSE(staging.TakeAnnounced(&slot).has_value());
    EXPECT_EQ(slot, -1);
  }
}

// The loop of worker/data/look_ahead_source.h: batch n computes while n + 1
// is staged into the other slot, and the call for n + 1 reads it there.
TEST(BatchStagingTest, LookAheadAlternatesSlotsAndUploadsOnlyTheFirst) {
  BatchStaging staging;
  std::vector<Buffer> buffers(6, Buffer(4));
  staging.Announce(buffers[1].view());
  BatchStaging::Use use = staging.Begin(buffers[0].view());
  EXPECT_TRUE(use.upload);
  EXPECT_EQ(use.slot, 0);
  int slot = -1;
  std::optional<Batch> next = staging.TakeAnnounced(&slot);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->inputs.data(), buffers[1].inputs.data());
  EXPECT_EQ(slot, 1);
  for (int n = 1; n + 1 < 6; ++n) {
    staging.Announce(buffers[n + 1].view());
    use = staging.Begin(buffers[n].view());
    EXPECT_FALSE(use.upload) << "batch " << n;
    EXPECT_EQ(use.slot, n % 2) << "batch " << n;
    next = staging.TakeAnnounced(&slot);
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->labels.data(), buffers[n + 1].labels.data());
    EXPECT_EQ(slot, 1 - use.slot) << "never the slot being read";
  }
  use = staging.Begin(buffers[5].view());
  EXPECT_FALSE(use.upload);
  EXPECT_FALSE(staging.TakeAnnounced(&slot).has_value());
  EXPECT_EQ(staging.staged_slot(), -1);
}

TEST(BatchStagingTest, AnotherBatchIsUploadedBesideTheStagedOne) {
  BatchStaging staging;
  Buffer a(4), b(4), other(4);
  staging.Announce(b.view());
  staging.Begin(a.view());
  int slot = -1;
  ASSERT_TRUE(staging.TakeAnnounced(&slot).has_value());
  ASSERT_EQ(slot, 1);

  // A forward-only call in between (an evaluation) reads another batch: it
  // must not land in the staged batch's slot.
  BatchStaging::Use use = staging.Begin(other.view());
  EXPECT_TRUE(use.upload);
  EXPECT_EQ(use.slot, 0);
  // The staged batch is still there for its gradient call.
  use = staging.Begin(b.view());
  EXPECT_FALSE(use.upload);
  EXPECT_EQ(use.slot, 1);
}

TEST(BatchStagingTest, AWrongGuessIsUploadedAndTheNextAnnouncementReplacesIt) {
  BatchStaging staging;
  Buffer a(4), b(4), c(4), d(4);
  staging.Announce(b.view());
  staging.Begin(a.view());
  int slot = -1;
  ASSERT_TRUE(staging.TakeAnnounced(&slot).has_value());
  // The loop computes c instead of b and announces d.
  staging.Announce(d.view());
  BatchStaging::Use use = staging.Begin(c.view());
  EXPECT_TRUE(use.upload);
  EXPECT_EQ(use.slot, 0);
  ASSERT_TRUE(staging.TakeAnnounced(&slot).has_value());
  EXPECT_EQ(slot, 1);                           // b's stale copy is overwritten
  EXPECT_TRUE(staging.Begin(b.view()).upload);  // b is no longer staged
  // d was staged in slot 1 and is still there.
  use = staging.Begin(d.view());
  EXPECT_FALSE(use.upload);
  EXPECT_EQ(use.slot, 1);
}

TEST(BatchStagingTest, SameMemoryWithAnotherShapeIsNotTheStagedBatch) {
  BatchStaging staging;
  Buffer a(4), b(4);
  staging.Announce(b.view());
  staging.Begin(a.view());
  int slot = -1;
  ASSERT_TRUE(staging.TakeAnnounced(&slot).has_value());
  Batch shorter = b.view();
  shorter.sequences = 2;
  shorter.inputs = shorter.inputs.subspan(0, 6);
  shorter.labels = shorter.labels.subspan(0, 2);
  EXPECT_TRUE(staging.Begin(shorter).upload);
  Batch as_sequences = b.view();
  as_sequences.sequences = 2;
  as_sequences.steps = 2;
  EXPECT_TRUE(staging.Begin(as_sequences).upload);
  EXPECT_FALSE(staging.Begin(b.view()).upload);
}

TEST(BatchStagingTest, AnnouncingTheBatchAboutToComputeCopiesNothingExtra) {
  BatchStaging staging;
  Buffer a(4);
  staging.Announce(a.view());
  const BatchStaging::Use use = staging.Begin(a.view());
  EXPECT_TRUE(use.upload);
  int slot = -1;
  EXPECT_FALSE(staging.TakeAnnounced(&slot).has_value());
}

TEST(BatchStagingTest, ResetForgetsTheAnnouncedAndTheStaged) {
  BatchStaging staging;
  Buffer a(4), b(4), c(4);
  staging.Announce(b.view());
  staging.Begin(a.view());
  int slot = -1;
  ASSERT_TRUE(staging.TakeAnnounced(&slot).has_value());
  staging.Announce(c.view());
  staging.Reset();
  EXPECT_EQ(staging.staged_slot(), -1);
  EXPECT_TRUE(staging.Begin(b.view()).upload);
  EXPECT_FALSE(staging.TakeAnnounced(&slot).has_value());
}

}  // namespace
}  // namespace cuda
}  // namespace asgd
