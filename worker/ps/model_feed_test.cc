// ModelFeed without overlap: a pull before the next minibatch after every
// push that was answered, failed or refused, and none otherwise. (The
// overlapped feed is driven through the trainer: trainer_test.cc.)
#include "worker/ps/model_feed.h"

#include <vector>

#include "gtest/gtest.h"
#include "worker/loop/fake_clock.h"

namespace asgd {
namespace {

TEST(ModelFeedTest, PullsOnlyAfterAPushWithoutOverlap) {
  FakeClock clock;
  RetryPolicy retry(RetryOptions{}, 0, nullptr, &clock, nullptr);
  int pulls = 0;
  ModelFeedOptions o;
  o.size = 2;
  ModelFeed feed(o, /*client=*/nullptr, &retry,
                 [&](std::vector<float>* params,
                     std::vector<uint64_t>* versions) {
                   ++pulls;
                   *params = {1.0f * pulls, 1.0f * pulls};
                   *versions = {static_cast<uint64_t>(pulls)};
                   return absl::OkStatus();
                 });
  std::vector<float> params(2, 0.0f);
  std::vector<uint64_t> versions;
  ASSERT_TRUE(feed.Refresh(&params, &versions).ok());
  EXPECT_EQ(pulls, 0);  // the model held is fresh
  feed.PushCompleted();  // no background pulls: nothing happens
  feed.PushSettled(/*stale_drop=*/true);
  ASSERT_TRUE(feed.Refresh(&params, &versions).ok());
  EXPECT_EQ(pulls, 1);
  EXPECT_EQ(versions, (std::vector<uint64_t>{1}));
  ASSERT_TRUE(feed.Refresh(&params, &versions).ok());
  EXPECT_EQ(pulls, 1);
  feed.PushLost();
  ASSERT_TRUE(feed.Refresh(&params, &versions).ok());
  EXPECT_EQ(pulls, 2);
  EXPECT_EQ(params, (std::vector<float>{2, 2}));
}

TEST(ModelFeedTest, AFailedPullIsTheCallersError) {
  FakeClock clock;
  RetryPolicy retry(RetryOptions{}, 0, nullptr, &clock, nullptr);
  ModelFeedOptions o;
  o.size = 1;
  ModelFeed feed(o, nullptr, &retry,
                 [](std::vector<float>*, std::vector<uint64_t>*) {
                   return absl::PermissionDeniedError("bad token");
                 });
  std::vector<float> params(1);
  std::vector<uint64_t> versions;
  feed.PushLost();
  EXPECT_EQ(feed.Refresh(&params, &versions).code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace asgd
