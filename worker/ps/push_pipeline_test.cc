// PushPipeline without a pool: what a push carries (the average, the oldest
// versions, the count), when it is due, and that a background push lets
// minibatches accumulate until the cap.
#include "worker/ps/push_pipeline.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

struct Sent {
  std::vector<float> average;
  std::vector<uint64_t> versions;
  int n = 0;
};

TEST(PushPipelineTest, PushesTheAverageWithTheOldestVersionsEveryK) {
  std::vector<Sent> sent;
  PushPipelineOptions o;
  o.push_every = 2;
  PushPipeline pipeline(2, o,
                        [&](absl::Span<const float> average,
                            const std::vector<uint64_t>& versions, int n) {
                          sent.push_back(
                              {{average.begin(), average.end()}, versions, n});
                          PushOutcome outcome;
                          outcome.applied = 1;
                          return absl::StatusOr<PushOutcome>(outcome);
                        });
  EXPECT_FALSE(pipeline.Collect().has_value());
  pipeline.Add(std::vector<float>{1, 2}, {7});
  EXPECT_FALSE(pipeline.Due());
  pipeline.Add(std::vector<float>{3, 6}, {8});
  ASSERT_TRUE(pipeline.Due());
  ASSERT_TRUE(pipeline.Start().ok());
  EXPECT_EQ(pipeline.pending(), 0);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].average, (std::vector<float>{2, 4}));
  EXPECT_EQ(sent[0].versions, (std::vector<uint64_t>{7}));
  EXPECT_EQ(sent[0].n, 2);
  EXPECT_TRUE(pipeline.Landed());
  auto outcome = pipeline.Collect();
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->ok());
  EXPECT_EQ((*outcome)->applied, 1);
  EXPECT_FALSE(pipeline.Collect().has_value());
  // The sum starts again from zero.
  pipeline.Add(std::vector<float>{1, 1}, {9});
  pipeline.Add(std::vector<float>{1, 1}, {9});
  ASSERT_TRUE(pipeline.Start().ok());
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].average, (std::vector<float>{1, 1}));
  EXPECT_EQ(sent[1].versions, (std::vector<uint64_t>{9}));
}

TEST(PushPipelineTest, ABackgroundPushLetsMinibatchesAccumulateUpToTheCap) {
  absl::Notification release;
  absl::Mutex mu;
  std::vector<int> counts;
  PushPipelineOptions o;
  o.push_every = 1;
  o.background = true;
  o.max_minibatches = 3;
  PushPipeline pipeline(1, o,
                        [&](absl::Span<const float>,
                            const std::vector<uint64_t>&, int n) {
                          release.WaitForNotification();
                          absl::MutexLock lock(&mu);
                          counts.push_back(n);
                          return absl::StatusOr<PushOutcome>(PushOutcome{});
                        });
  pipeline.Add(std::vector<float>{1}, {1});
  ASSERT_TRUE(pipeline.Due());
  ASSERT_TRUE(pipeline.Start().ok());  // returns at once: the push waits on the wire
  EXPECT_FALSE(pipeline.Landed());
  pipeline.Add(std::vector<float>{1}, {1});
  EXPECT_FALSE(pipeline.Due());  // busy, 1 < 3
  pipeline.Add(std::vector<float>{1}, {1});
  EXPECT_FALSE(pipeline.Due());  // busy, 2 < 3
  pipeline.Add(std::vector<float>{1}, {1});
  EXPECT_TRUE(pipeline.Due());  // the cap: wait for the wire
  release.Notify();
  auto outcome = pipeline.Collect();  // waits for the push
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->ok());
  ASSERT_TRUE(pipeline.Start().ok());
  ASSERT_TRUE(pipeline.Collect().has_value());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(counts, (std::vector<int>{1, 3}));
}

TEST(PushPipelineTest, AFailedPushIsHandedBackNotResent) {
  int calls = 0;
  PushPipelineOptions o;
  PushPipeline pipeline(1, o,
                        [&](absl::Span<const float>,
                            const std::vector<uint64_t>&, int) {
                          ++calls;
                          return absl::StatusOr<PushOutcome>(
                              absl::UnavailableError("server away"));
                        });
  pipeline.Add(std::vector<float>{1}, {1});
  ASSERT_TRUE(pipeline.Start().ok());
  auto outcome = pipeline.Collect();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(pipeline.pending(), 0);
  EXPECT_FALSE(pipeline.Due());
}

}  // namespace
}  // namespace asgd
