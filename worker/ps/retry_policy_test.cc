// RetryPolicy on a fake clock: which errors are waited out, the backoff's
// growth, bound and jitter, the retry budget, and the recovery line.
#include "worker/ps/retry_policy.h"

#include <sstream>

#include "gtest/gtest.h"
#include "worker/loop/fake_clock.h"

namespace asgd {
namespace {

RetryOptions Options() {
  RetryOptions o;
  o.initial_backoff = absl::Milliseconds(100);
  o.max_backoff = absl::Milliseconds(400);
  o.max_retry_time = absl::Seconds(2);
  o.jitter_seed = 42;
  return o;
}

TEST(RetryPolicyTest, FinalErrorsAreReturnedAtOnce) {
  FakeClock clock;
  RetryPolicy retry(Options(), 0, nullptr, &clock, nullptr);
  const absl::Status bad = absl::InvalidArgumentError("server unavailable");
  EXPECT_EQ(retry.BackOff(bad, "pull"), bad);
  // RESOURCE_EXHAUSTED is waited out only for the minibatch pool.
  const absl::Status full = absl::ResourceExhaustedError("no room");
  EXPECT_EQ(retry.BackOff(full, "push"), full);
  EXPECT_EQ(clock.Sleeps(), absl::ZeroDuration());
  EXPECT_TRUE(retry.BackOff(full, "fetch", /*pool_full=*/true).ok());
  EXPECT_EQ(retry.failures(), 1);
}

TEST(RetryPolicyTest, BackoffDoublesUpToTheBoundWithJitterThenGivesUp) {
  FakeClock clock;
  std::ostringstream log;
  RetryPolicy retry(Options(), 3, nullptr, &clock, &log);
  const absl::Status away = absl::UnavailableError("connection refused");
  absl::Duration bound = absl::Milliseconds(100);
  for (int i = 0; i < 4; ++i) {
    const absl::Duration before = clock.Sleeps();
    ASSERT_TRUE(retry.BackOff(away, "pull").ok());
    const absl::Duration waited = clock.Sleeps() - before;
    EXPECT_GE(waited, bound / 2) << i;
    EXPECT_LE(waited, bound) << i;
    bound = std::min(bound * 2, absl::Milliseconds(400));
  }
  EXPECT_NE(log.str().find("worker 3: pull failed"), std::string::npos);
  clock.Advance(absl::Seconds(3));
  const absl::Status last = retry.BackOff(away, "pull");
  EXPECT_EQ(last.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(last.message().find("still failing after"), absl::string_view::npos);
}

TEST(RetryPolicyTest, SuccessEndsTheRunOfFailuresAndSaysSoOnce) {
  FakeClock clock;
  std::ostringstream log;
  RetryPolicy retry(Options(), 1, nullptr, &clock, &log);
  retry.Succeeded("back");
  EXPECT_EQ(log.str(), "");  // nothing had failed
  ASSERT_TRUE(retry.BackOff(absl::AbortedError("restored"), "push").ok());
  retry.Succeeded("back");
  EXPECT_NE(log.str().find("worker 1: back\n"), std::string::npos);
  EXPECT_EQ(retry.failures(), 0);
  // A new run of failures has a fresh budget.
  clock.Advance(absl::Seconds(10));
  EXPECT_TRUE(retry.BackOff(absl::DeadlineExceededError("slow"), "pull").ok());
}

TEST(RetryPolicyTest, RetryCallsUntilSuccessOrAFinalError) {
  FakeClock clock;
  std::ostringstream log;
  RetryPolicy retry(Options(), 2, nullptr, &clock, &log);
  int calls = 0;
  EXPECT_TRUE(retry
                  .Retry(
                      [&] {
                        return ++calls < 3 ? absl::UnavailableError("away")
                                           : absl::OkStatus();
                      },
                      "pull", "back")
                  .ok());
  EXPECT_EQ(calls, 3);
  EXPECT_GT(clock.Sleeps(), absl::ZeroDuration());
  EXPECT_NE(log.str().find("worker 2: back\n"), std::string::npos);
  EXPECT_EQ(retry.failures(), 0);
  calls = 0;
  const absl::Status bad = absl::InvalidArgumentError("malformed");
  EXPECT_EQ(retry.Retry(
                [&] {
                  ++calls;
                  return bad;
                },
                "push", "back"),
            bad);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace asgd
