// PrefetchSource against a scripted source: the same minibatches in the
// same order with the same epochs, the end and an error passed on (and kept
// for every later call), the other source never more than the depth (and
// the one being drawn) ahead of the loop, and a source destroyed in the
// middle of a run.
#include "worker/data/prefetch_source.h"

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// Minibatch i has inputs[0] == i and label i; epochs() is i / 10 after it.
// Ends after `count` minibatches, or fails at minibatch `fail_at`.
class Scripted final : public BatchSource {
 public:
  Scripted(int count, int fail_at, const std::atomic<int>* consumed)
      : count_(count), fail_at_(fail_at), consumed_(consumed) {}

  absl::StatusOr<bool> Next(BatchBuffer* batch) override {
    most_ahead = std::max(most_ahead, drawn_ + 1 - consumed_->load());
    if (drawn_ == fail_at_) return absl::DataLossError("bad minibatch");
    if (drawn_ == count_) return false;
    batch->inputs[0] = static_cast<float>(drawn_);
    batch->labels[0] = drawn_;
    ++drawn_;
    return true;
  }
  double epochs() const override { return drawn_ / 10.0; }

  int most_ahead = 0;  // most minibatches drawn ahead of the loop

 private:
  const int count_, fail_at_;
  const std::atomic<int>* const consumed_;
  int drawn_ = 0;
};

TEST(PrefetchSourceTest, TheSameMinibatchesInOrderThenTheEnd) {
  for (int depth : {1, 2, 4}) {
    SCOPED_TRACE(depth);
    std::atomic<int> consumed{0};
    auto inner = std::make_unique<Scripted>(25, -1, &consumed);
    Scripted* script = inner.get();
    PrefetchSource source(std::move(inner), depth, BatchBuffer(2, 1, 3));
    BatchBuffer batch(2, 1, 3);
    for (int i = 0; i < 25; ++i) {
      absl::StatusOr<bool> more = source.Next(&batch);
      ASSERT_TRUE(more.ok() && *more) << i;
      EXPECT_EQ(batch.inputs[0], static_cast<float>(i));
      EXPECT_EQ(batch.labels[0], i);
      EXPECT_EQ(batch.inputs.size(), 6u);
      EXPECT_DOUBLE_EQ(source.epochs(), (i + 1) / 10.0);
      consumed.store(i + 1);
    }
    for (int again = 0; again < 2; ++again) {
      absl::StatusOr<bool> more = source.Next(&batch);
      ASSERT_TRUE(more.ok());
      EXPECT_FALSE(*more);
    }
    // The loop consumed each minibatch after Next returned it, so the
    // other source may have started one more than the depth.
    EXPECT_LE(script->most_ahead, depth + 1);
    EXPECT_GE(script->most_ahead, 1);
  }
}

TEST(PrefetchSourceTest, AnErrorComesAfterTheMinibatchesBeforeIt) {
  std::atomic<int> consumed{0};
  PrefetchSource source(std::make_unique<Scripted>(100, 3, &consumed), 2,
                        BatchBuffer(1, 1, 1));
  BatchBuffer batch(1, 1, 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(*source.Next(&batch));
    EXPECT_EQ(batch.labels[0], i);
    consumed.store(i + 1);
  }
  for (int again = 0; again < 2; ++again) {
    EXPECT_EQ(source.Next(&batch).status().code(),
              absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(batch.labels[0], 2);  // the failed draw changed nothing
}

TEST(PrefetchSourceTest, StopsInTheMiddleOfARun) {
  std::atomic<int> consumed{0};
  auto source = std::make_unique<PrefetchSource>(
      std::make_unique<Scripted>(1000, -1, &consumed), 3, BatchBuffer(1, 1, 1));
  BatchBuffer batch(1, 1, 1);
  ASSERT_TRUE(*source->Next(&batch));
  source.reset();  // its thread waits for a free buffer, or draws one
  EXPECT_EQ(batch.labels[0], 0);
}

}  // namespace
}  // namespace asgd
