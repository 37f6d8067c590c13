#include "server/stream_watchdog.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  StreamWatchdog::Clock fn() {
    return [this] { return now; };
  }
};

TEST(StreamWatchdogTest, ExpiresOnlyStreamsWithoutProgress) {
  FakeClock clock;
  StreamWatchdog watchdog(absl::Seconds(10), clock.fn(),
                          /*start_thread=*/false);
  int a = 0, b = 0;
  auto ha = watchdog.Watch([&] { ++a; });
  auto hb = watchdog.Watch([&] { ++b; });
  clock.now += absl::Seconds(6);
  watchdog.Touch(hb);  // b made progress
  EXPECT_EQ(watchdog.Poll(), 0);
  clock.now += absl::Seconds(4);  // a: 10 s without progress
  EXPECT_EQ(watchdog.Poll(), 1);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 0);
  EXPECT_EQ(watchdog.watched(), 1);
  clock.now += absl::Seconds(6);  // b: 10 s since its progress
  EXPECT_EQ(watchdog.Poll(), 1);
  EXPECT_EQ(b, 1);
  // Each callback runs once.
  clock.now += absl::Hours(1);
  EXPECT_EQ(watchdog.Poll(), 0);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
}

TEST(StreamWatchdogTest, UnwatchedStreamsNeverExpire) {
  FakeClock clock;
  StreamWatchdog watchdog(absl::Seconds(1), clock.fn(), false);
  int calls = 0;
  auto h = watchdog.Watch([&] { ++calls; });
  watchdog.Unwatch(h);
  clock.now += absl::Hours(1);
  EXPECT_EQ(watchdog.Poll(), 0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(watchdog.watched(), 0);
}

TEST(StreamWatchdogTest, ItsThreadExpiresAStalledStream) {
  StreamWatchdog watchdog(absl::Milliseconds(50));
  absl::Notification expired;
  const absl::Time start = absl::Now();
  auto h = watchdog.Watch([&] { expired.Notify(); });
  ASSERT_TRUE(expired.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(watchdog.watched(), 0);
}

}  // namespace
}  // namespace asgd
