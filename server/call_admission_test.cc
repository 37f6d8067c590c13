#include "server/call_admission.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(CallAdmissionTest, EachKindHasItsOwnPlacesPerAddress) {
  CallAdmission a({/*per_peer=*/2, /*total=*/0});
  EXPECT_TRUE(a.Admit(CallKind::kPullStream, "ipv4:10.0.0.1"));
  EXPECT_TRUE(a.Admit(CallKind::kPullStream, "ipv4:10.0.0.1"));
  EXPECT_FALSE(a.Admit(CallKind::kPullStream, "ipv4:10.0.0.1"));
  // Another kind, another address: their own places.
  EXPECT_TRUE(a.Admit(CallKind::kPush, "ipv4:10.0.0.1"));
  EXPECT_TRUE(a.Admit(CallKind::kPullStream, "ipv4:10.0.0.2"));
  EXPECT_EQ(a.open(CallKind::kPullStream), 3);
  EXPECT_EQ(a.addresses(), 2);
  a.Release(CallKind::kPullStream, "ipv4:10.0.0.1");
  EXPECT_TRUE(a.Admit(CallKind::kPullStream, "ipv4:10.0.0.1"));
  // A refused call took nothing: releasing what was admitted empties it.
  for (int i = 0; i < 2; ++i) a.Release(CallKind::kPullStream, "ipv4:10.0.0.1");
  a.Release(CallKind::kPullStream, "ipv4:10.0.0.2");
  a.Release(CallKind::kPush, "ipv4:10.0.0.1");
  EXPECT_EQ(a.open(CallKind::kPullStream), 0);
  EXPECT_EQ(a.addresses(), 0);
  // Releasing what was never admitted changes nothing.
  a.Release(CallKind::kOther, "ipv4:10.0.0.9");
  EXPECT_EQ(a.open(CallKind::kOther), 0);
}

TEST(CallAdmissionTest, ZeroPerPeerMeansNoLimit) {
  CallAdmission a({/*per_peer=*/0, /*total=*/0});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(a.Admit(CallKind::kPush, "x"));
  EXPECT_EQ(a.open(CallKind::kPush), 1000);
}

TEST(CallAdmissionTest, TotalBoundsCallsAliveFromEveryAddress) {
  CallAdmission a({/*per_peer=*/16, /*total=*/3});
  EXPECT_TRUE(a.Enter());
  EXPECT_TRUE(a.Enter());
  EXPECT_TRUE(a.Enter());
  EXPECT_FALSE(a.Enter());  // refused: not counted
  EXPECT_EQ(a.alive(), 3);
  a.Leave();
  EXPECT_TRUE(a.Enter());
  EXPECT_EQ(a.alive(), 3);
}

TEST(CallAdmissionTest, ConcurrentCallsNeverPassTheBounds) {
  CallAdmission a({/*per_peer=*/4, /*total=*/6});
  std::atomic<int> inside{0}, most{0}, per_peer_most{0};
  std::atomic<int> per_peer_inside{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        if (!a.Enter()) continue;
        const int now = ++inside;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        if (a.Admit(CallKind::kPullStream, "one")) {
          const int p = ++per_peer_inside;
          int pm = per_peer_most.load();
          while (p > pm && !per_peer_most.compare_exchange_weak(pm, p)) {
          }
          --per_peer_inside;
          a.Release(CallKind::kPullStream, "one");
        }
        --inside;
        a.Leave();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), 6);
  EXPECT_LE(per_peer_most.load(), 4);
  EXPECT_EQ(a.alive(), 0);
  EXPECT_EQ(a.open(CallKind::kPullStream), 0);
}

TEST(CallAdmissionTest, PeerAddressDropsThePort) {
  EXPECT_EQ(PeerAddress("ipv4:10.0.0.7:51234"), "ipv4:10.0.0.7");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:5"), "ipv6:[::1]");
  EXPECT_EQ(PeerAddress("ipv6:[::1]"), "ipv6:[::1]");
  EXPECT_EQ(PeerAddress("unix:/tmp/s"), "unix");
}

}  // namespace
}  // namespace asgd
