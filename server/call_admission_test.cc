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
  CallAdmission a({/*per_peer=*/16, /*total=*/3, /*per_address_alive=*/0});
  EXPECT_EQ(a.Enter("a"), Entry::kEntered);
  EXPECT_EQ(a.Enter("b"), Entry::kEntered);
  EXPECT_EQ(a.Enter("a"), Entry::kEntered);
  EXPECT_EQ(a.Enter("c"), Entry::kServerFull);  // refused: not counted
  EXPECT_EQ(a.alive(), 3);
  EXPECT_EQ(a.alive("c"), 0);
  a.Leave("a");
  EXPECT_EQ(a.Enter("c"), Entry::kEntered);
  EXPECT_EQ(a.alive(), 3);
  EXPECT_EQ(a.alive("a"), 1);
}

TEST(CallAdmissionTest, OneAddressCanNotTakeEveryPlace) {
  // The calls an address opens and resets stay alive until the server
  // retires them: it holds at most its share, and the others come in.
  CallAdmission a({/*per_peer=*/16, /*total=*/5, /*per_address_alive=*/3});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(a.Enter("ipv4:10.0.0.1"), Entry::kEntered);
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.Enter("ipv4:10.0.0.1"), Entry::kAddressFull);
  }
  EXPECT_EQ(a.alive("ipv4:10.0.0.1"), 3);
  EXPECT_EQ(a.alive(), 3);
  EXPECT_EQ(a.Enter("ipv4:10.0.0.2"), Entry::kEntered);
  EXPECT_EQ(a.Enter("ipv4:10.0.0.3"), Entry::kEntered);
  // The server is full now: every address is refused, SERVER_LIMIT first.
  EXPECT_EQ(a.Enter("ipv4:10.0.0.4"), Entry::kServerFull);
  EXPECT_EQ(a.Enter("ipv4:10.0.0.1"), Entry::kServerFull);
  a.Leave("ipv4:10.0.0.1");
  EXPECT_EQ(a.Enter("ipv4:10.0.0.1"), Entry::kEntered);
  // Leaving from an address with nothing alive changes nothing.
  a.Leave("ipv4:10.0.0.9");
  EXPECT_EQ(a.alive(), 5);
  for (const char* address :
       {"ipv4:10.0.0.1", "ipv4:10.0.0.1", "ipv4:10.0.0.1", "ipv4:10.0.0.2",
        "ipv4:10.0.0.3"}) {
    a.Leave(address);
  }
  EXPECT_EQ(a.alive(), 0);
  EXPECT_EQ(a.alive("ipv4:10.0.0.1"), 0);
}

TEST(CallAdmissionTest, ZeroPerAddressAliveMeansNoLimit) {
  CallAdmission a({/*per_peer=*/16, /*total=*/0, /*per_address_alive=*/0});
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.Enter("x"), Entry::kEntered);
  EXPECT_EQ(a.alive("x"), 1000);
}

TEST(CallAdmissionTest, ConcurrentCallsNeverPassTheBounds) {
  CallAdmission a({/*per_peer=*/4, /*total=*/6, /*per_address_alive=*/5});
  std::atomic<int> inside{0}, most{0}, per_peer_most{0};
  std::atomic<int> per_peer_inside{0};
  std::atomic<int> one_inside{0}, one_most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    // Half the threads call from "one", half from an address of their own.
    const std::string address = t % 2 == 0 ? "one" : "t" + std::to_string(t);
    threads.emplace_back([&, address] {
      for (int i = 0; i < 5000; ++i) {
        if (a.Enter(address) != Entry::kEntered) continue;
        const int now = ++inside;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        const int from_one = address == "one" ? ++one_inside : 0;
        int om = one_most.load();
        while (from_one > om && !one_most.compare_exchange_weak(om, from_one)) {
        }
        if (a.Admit(CallKind::kPullStream, "one")) {
          const int p = ++per_peer_inside;
          int pm = per_peer_most.load();
          while (p > pm && !per_peer_most.compare_exchange_weak(pm, p)) {
          }
          --per_peer_inside;
          a.Release(CallKind::kPullStream, "one");
        }
        if (address == "one") --one_inside;
        --inside;
        a.Leave(address);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), 6);
  EXPECT_LE(per_peer_most.load(), 4);
  EXPECT_LE(one_most.load(), 5);
  EXPECT_EQ(a.alive(), 0);
  EXPECT_EQ(a.alive("one"), 0);
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
