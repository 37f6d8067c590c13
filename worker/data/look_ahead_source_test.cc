// LookAheadSource against a scripted source: the same minibatches in the
// same order with the same epochs; each one after the first announced by the
// Next before it, with the memory and the values the loop then gets; the
// end and an error passed on after the minibatches before them, and kept.
#include "worker/data/look_ahead_source.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// Minibatch i has inputs[0] == i and label i; epochs() is i / 10 after it.
// Ends after `count` minibatches, or fails at minibatch `fail_at`.
class Scripted final : public BatchSource {
 public:
  Scripted(int count, int fail_at) : count_(count), fail_at_(fail_at) {}

  absl::StatusOr<bool> Next(BatchBuffer* batch) override {
    ++calls;
    if (drawn_ == fail_at_) return absl::DataLossError("bad minibatch");
    if (drawn_ == count_) return false;
    batch->inputs[0] = static_cast<float>(drawn_);
    batch->labels[0] = drawn_;
    ++drawn_;
    return true;
  }
  double epochs() const override { return drawn_ / 10.0; }

  int calls = 0;

 private:
  const int count_, fail_at_;
  int drawn_ = 0;
};

// What the backend was told: where each announced batch was and its label.
struct Announced {
  const float* inputs;
  const int32_t* labels;
  int32_t label;
};

TEST(LookAheadSourceTest, EachMinibatchIsAnnouncedBeforeTheLoopGetsIt) {
  auto inner = std::make_unique<Scripted>(12, -1);
  Scripted* script = inner.get();
  std::vector<Announced> announced;
  LookAheadSource source(
      std::move(inner),
      [&announced](const Batch& next) {
        announced.push_back(
            {next.inputs.data(), next.labels.data(), next.labels[0]});
      },
      BatchBuffer(2, 1, 3));
  BatchBuffer batch(2, 1, 3);
  for (int i = 0; i < 12; ++i) {
    absl::StatusOr<bool> more = source.Next(&batch);
    ASSERT_TRUE(more.ok() && *more) << i;
    EXPECT_EQ(batch.inputs[0], static_cast<float>(i));
    EXPECT_EQ(batch.labels[0], i);
    EXPECT_EQ(batch.inputs.size(), 6u);
    // The epochs of minibatch i, not of the one drawn ahead.
    EXPECT_DOUBLE_EQ(source.epochs(), (i + 1) / 10.0);
    // One ahead: minibatch i + 1 drawn (and announced, unless there is
    // none), never more.
    EXPECT_EQ(script->calls, i + 2);
    if (i >= 1) {  // minibatch i was announced by the Next before
      const Announced& a = announced[i - 1];
      EXPECT_EQ(a.inputs, batch.inputs.data()) << "the same memory";
      EXPECT_EQ(a.labels, batch.labels.data());
      EXPECT_EQ(a.label, i) << "unchanged since it was announced";
    }
    EXPECT_EQ(announced.size(), static_cast<size_t>(i < 11 ? i + 1 : 11));
    // The loop's use of the current minibatch does not touch the next one.
    batch.inputs[0] = -1.0f;
  }
  for (int again = 0; again < 2; ++again) {
    absl::StatusOr<bool> more = source.Next(&batch);
    ASSERT_TRUE(more.ok());
    EXPECT_FALSE(*more);
  }
  EXPECT_EQ(announced.size(), 11u);
  EXPECT_EQ(script->calls, 13);  // the end is asked for once
}

TEST(LookAheadSourceTest, AnErrorComesAfterTheMinibatchesBeforeIt) {
  int announcements = 0;
  LookAheadSource source(
      std::make_unique<Scripted>(100, 3),
      [&announcements](const Batch&) { ++announcements; },
      BatchBuffer(1, 1, 1));
  BatchBuffer batch(1, 1, 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(*source.Next(&batch));
    EXPECT_EQ(batch.labels[0], i);
  }
  EXPECT_EQ(announcements, 2);  // minibatches 1 and 2; not the failed draw
  for (int again = 0; again < 2; ++again) {
    absl::StatusOr<bool> more = source.Next(&batch);
    EXPECT_EQ(more.status().code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_DOUBLE_EQ(source.epochs(), 0.3);
}

TEST(LookAheadSourceTest, AnEmptySourceEndsAtOnceAndAnnouncesNothing) {
  int announcements = 0;
  LookAheadSource source(
      std::make_unique<Scripted>(0, -1),
      [&announcements](const Batch&) { ++announcements; },
      BatchBuffer(1, 1, 1));
  BatchBuffer batch(1, 1, 1);
  absl::StatusOr<bool> more = source.Next(&batch);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  EXPECT_EQ(announcements, 0);
}

}  // namespace
}  // namespace asgd
