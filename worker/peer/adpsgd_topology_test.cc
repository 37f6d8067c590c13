// Properties of the AD-PSGD pairings over many steps and seeds: the random
// ring is a perfect matching every step for even worker counts, leaves
// exactly one worker out for odd counts, is the same for every worker, and
// its mixing matrix is doubly stochastic.
#include "worker/peer/adpsgd_topology.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(AdpsgdTopologyTest, Parse) {
  EXPECT_EQ(*ParseTopology("fixed_ring"), Topology::kFixedRing);
  EXPECT_EQ(*ParseTopology("random_ring"), Topology::kRandomRing);
  EXPECT_FALSE(ParseTopology("star").ok());
  EXPECT_EQ(TopologyName(Topology::kRandomRing), "random_ring");
}

TEST(AdpsgdTopologyTest, RandomRingIsAPermutationAndDeterministic) {
  for (int n = 1; n <= 9; ++n) {
    for (uint64_t step = 0; step < 50; ++step) {
      std::vector<int> ring = RandomRing(n, 7, step);
      EXPECT_EQ(ring, RandomRing(n, 7, step));
      std::vector<int> sorted = ring;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int> want(n);
      std::iota(want.begin(), want.end(), 0);
      EXPECT_EQ(sorted, want);
    }
  }
  // Golden values (from an independent SplitMix64 implementation): the ring
  // must not depend on the machine, compiler or standard library.
  EXPECT_EQ(RandomRing(4, 1, 0), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(RandomRing(8, 1, 0), (std::vector<int>{0, 5, 2, 7, 3, 4, 1, 6}));
  EXPECT_EQ(RandomRing(8, 1, 1), (std::vector<int>{7, 1, 4, 5, 3, 0, 2, 6}));
  EXPECT_EQ(RandomRing(5, 42, 1000), (std::vector<int>{1, 0, 2, 3, 4}));
  EXPECT_NE(RandomRing(8, 1, 0), RandomRing(8, 1, 1));
  EXPECT_NE(RandomRing(8, 1, 0), RandomRing(8, 2, 0));
}

TEST(AdpsgdTopologyTest, RandomRingMatchingProperties) {
  for (int n = 2; n <= 9; ++n) {
    std::vector<int> idle_count(n, 0);
    std::set<std::pair<int, int>> pairs_seen;
    int steps = 0;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      for (uint64_t step = 0; step < 500; ++step, ++steps) {
        const std::vector<int> partner = RandomRingMatching(n, seed, step);
        int idle = 0;
        // Mixing matrix W = I - sum over pairs (e_i - e_j)(e_i - e_j)^T / 2.
        std::vector<std::vector<double>> w(n, std::vector<double>(n, 0));
        for (int i = 0; i < n; ++i) w[i][i] = 1;
        for (int i = 0; i < n; ++i) {
          const int j = partner[i];
          if (j < 0) {
            ++idle;
            ++idle_count[i];
            continue;
          }
          ASSERT_NE(j, i);
          ASSERT_EQ(partner[j], i) << "not symmetric: n " << n;
          // Exactly one of the pair starts the exchange, and every worker
          // computes the same: no coordinator needed.
          const int starts_i =
              ExchangePartner(Topology::kRandomRing, n, seed, step, i);
          const int starts_j =
              ExchangePartner(Topology::kRandomRing, n, seed, step, j);
          ASSERT_TRUE((starts_i == j && starts_j == -1) ||
                      (starts_j == i && starts_i == -1))
              << "n " << n << " seed " << seed << " step " << step;
          if (i < j) {
            pairs_seen.insert({i, j});
            w[i][i] -= 0.5;
            w[j][j] -= 0.5;
            w[i][j] += 0.5;
            w[j][i] += 0.5;
          }
        }
        ASSERT_EQ(idle, n % 2) << "n " << n;
        for (int i = 0; i < n; ++i) {
          double row = 0, col = 0;
          for (int k = 0; k < n; ++k) {
            row += w[i][k];
            col += w[k][i];
            ASSERT_EQ(w[i][k], w[k][i]);
            ASSERT_GE(w[i][k], 0);
          }
          ASSERT_EQ(row, 1.0);
          ASSERT_EQ(col, 1.0);
        }
      }
    }
    // Over many steps every edge of the complete graph is used, and for odd
    // counts every worker sits out about 1/n of the steps.
    EXPECT_EQ(static_cast<int>(pairs_seen.size()), n * (n - 1) / 2) << n;
    if (n % 2 == 1) {
      for (int i = 0; i < n; ++i) {
        EXPECT_NEAR(static_cast<double>(idle_count[i]) / steps, 1.0 / n, 0.03)
            << "worker " << i << " of " << n;
      }
    }
  }
}

TEST(AdpsgdTopologyTest, FixedRing) {
  for (uint64_t step = 0; step < 10; ++step) {
    EXPECT_EQ(ExchangePartner(Topology::kFixedRing, 1, 1, step, 0), -1);
    // Two workers would pick each other: only worker 0 starts.
    EXPECT_EQ(ExchangePartner(Topology::kFixedRing, 2, 1, step, 0), 1);
    EXPECT_EQ(ExchangePartner(Topology::kFixedRing, 2, 1, step, 1), -1);
    for (int n = 3; n <= 6; ++n) {
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(ExchangePartner(Topology::kFixedRing, n, 1, step, i),
                  (i + 1) % n);
      }
    }
  }
  EXPECT_EQ(ExchangePartner(Topology::kFixedRing, 4, 1, 0, 4), -1);
}

}  // namespace
}  // namespace asgd
