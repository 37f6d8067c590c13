// The device's top-k steps (top_k_impl.h) run on the CPU, step by step as
// the plugin launches them, against compression/top_k_plan.h's reference:
// the same entries (so the same bytes through TopKChunkBytes) and the same
// residual, bit for bit, for every tile size and both visiting orders.
#include "model/cuda/top_k_impl.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "compression/grad_codec.h"
#include "compression/top_k_plan.h"
#include "gtest/gtest.h"

namespace asgd {
namespace cuda_ops {
namespace {

// What TakeTopK's launches do, one loop per launch. `backward` visits
// elements and tiles last first (the device promises no order). Returns the
// bad bits; on none, the chunks' bytes in *out.
int RunSteps(const TopKPlan& plan, const std::vector<float>& sum, float scale,
             std::vector<float>* residual, int64_t tile_size, bool backward,
             std::vector<std::string>* out) {
  const int64_t n = static_cast<int64_t>(sum.size());
  std::vector<float> a(n, std::numeric_limits<float>::quiet_NaN());
  std::vector<TopKChunkJob> jobs;
  int64_t entries = 0;
  for (const TopKChunkPlan& p : plan.chunks) {
    jobs.push_back({p.flat_begin, p.count, p.k, entries});
    entries += p.k;
  }
  const int64_t tiles = (plan.max_count() + tile_size - 1) / tile_size;
  auto each = [&](int64_t count, const auto& op) {
    for (int64_t j = 0; j < count; ++j) op(backward ? count - 1 - j : j);
  };
  int bad = 0;
  std::vector<TopKChunkState> state(jobs.size());
  std::vector<uint32_t> hist(jobs.size() * kTopKMaxBins);
  for (int round = 0; round < kTopKRounds; ++round) {
    std::fill(hist.begin(), hist.end(), 0u);
    for (size_t c = 0; c < jobs.size(); ++c) {
      each(jobs[c].count, [&](int64_t i) {
        const int64_t e = jobs[c].flat_begin + i;
        const uint32_t key =
            round == 0 ? TopKAverage(sum.data(), scale, residual->data(), e,
                                     a.data(), &bad)
                       : TopKKeyOf(a[e]);
        const int bin = TopKBin(key, round, state[c].prefix);
        if (bin >= 0) ++hist[c * kTopKMaxBins + bin];
      });
    }
    for (size_t c = 0; c < jobs.size(); ++c) {
      TopKSelect(&hist[c * kTopKMaxBins], round, jobs[c].k, &state[c], &bad);
    }
  }
  std::vector<int64_t> greater(jobs.size() * tiles), equal(greater.size());
  for (size_t c = 0; c < jobs.size(); ++c) {
    each(tiles, [&](int64_t t) {
      TopKTileCount(a.data(), jobs[c], state[c], t, tile_size,
                    &greater[c * tiles + t], &equal[c * tiles + t]);
    });
    TopKTileOffsets(jobs[c], state[c], tiles, &greater[c * tiles],
                    &equal[c * tiles], &bad);
  }
  if (bad != 0) return bad;  // the emit launch writes nothing then
  std::vector<uint32_t> indices(entries, 0xffffffffu);
  std::vector<float> values(entries, std::numeric_limits<float>::quiet_NaN());
  for (size_t c = 0; c < jobs.size(); ++c) {
    each(tiles, [&](int64_t t) {
      TopKTileEmit(a.data(), jobs[c], state[c], t, tile_size,
                   greater[c * tiles + t], equal[c * tiles + t],
                   residual->data(), indices.data(), values.data());
    });
  }
  out->clear();
  for (const TopKChunkJob& j : jobs) {
    std::string bytes;
    const absl::Status s = TopKChunkBytes(
        j.count, absl::MakeConstSpan(indices).subspan(j.entry_begin, j.k),
        absl::MakeConstSpan(values).subspan(j.entry_begin, j.k), &bytes);
    EXPECT_TRUE(s.ok()) << s;
    out->push_back(bytes);
  }
  return bad;
}

void ExpectSameAsReference(const TopKPlan& plan, const std::vector<float>& sum,
                           const std::vector<float>& residual, float scale) {
  std::vector<float> want_residual = residual;
  std::vector<std::string> want;
  ASSERT_TRUE(
      EncodeTopKPlan(plan, sum, scale, absl::MakeSpan(want_residual), &want)
          .ok());
  for (int64_t tile_size : {1, 7, 256, 4096}) {
    for (bool backward : {false, true}) {
      std::vector<float> got_residual = residual;
      std::vector<std::string> got;
      ASSERT_EQ(
          RunSteps(plan, sum, scale, &got_residual, tile_size, backward, &got),
          0);
      ASSERT_EQ(got.size(), want.size());
      for (size_t c = 0; c < want.size(); ++c) {
        EXPECT_EQ(got[c], want[c]) << "chunk " << c << ", tiles of "
                                   << tile_size << ", backward " << backward;
      }
      // Compared as bits: the residual holds -0.0 and +0.0.
      ASSERT_EQ(got_residual.size(), want_residual.size());
      EXPECT_EQ(std::memcmp(got_residual.data(), want_residual.data(),
                            4 * want_residual.size()),
                0)
          << "tiles of " << tile_size << ", backward " << backward;
    }
  }
}

TopKPlan PlanOf(std::vector<TopKChunkPlan> chunks) {
  TopKPlan plan;
  plan.chunks = std::move(chunks);
  return plan;
}

TEST(TopKImplTest, SelectsTheReferencesEntriesFromNormalValues) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int64_t n = 20000;
  std::vector<float> sum(n), residual(n);
  for (float& v : sum) v = normal(rng);
  for (float& v : residual) v = 0.01f * normal(rng);
  // Gaps between chunks; k none, one, 1%, half and all.
  ExpectSameAsReference(PlanOf({{0, 9000, 90},
                                {9000, 1, 1},
                                {9100, 500, 0},
                                {9600, 5000, 2500},
                                {15000, 4999, 4999}}),
                        sum, residual, 1.0f / 3);
}

TEST(TopKImplTest, BreaksTiesAtTheThresholdAsTheReference) {
  // Few distinct magnitudes, both signs and both zeros: the k-th key is
  // shared by many elements, of which only the first ones are sent.
  std::mt19937 rng(13);
  const float levels[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.0f};
  const int64_t n = 6000;
  std::vector<float> sum(n), residual(n, 0.0f);
  for (float& v : sum) v = levels[rng() % 7];
  for (int64_t i = 0; i < n; i += 5) residual[i] = -0.0f;
  std::vector<TopKChunkPlan> chunks;
  for (int64_t k : {1, 13, 500, 999, 1000}) {
    chunks.push_back({static_cast<int64_t>(chunks.size()) * 1200, 1000, k});
  }
  ExpectSameAsReference(PlanOf(chunks), sum, residual, 1.0f);
  // All equal: the first k by index.
  std::fill(sum.begin(), sum.end(), 0.25f);
  ExpectSameAsReference(PlanOf(chunks), sum, residual, 1.0f);
}

TEST(TopKImplTest, SelectsAcrossTheWholeRangeOfMagnitudes) {
  // Subnormals to near the largest float: keys in every round's bins.
  std::mt19937 rng(17);
  const int64_t n = 8192;
  std::vector<float> sum(n), residual(n, 0.0f);
  for (float& v : sum) {
    uint32_t bits = rng() % 0x7f7fffffu;
    if (rng() % 2) bits |= 0x80000000u;
    std::memcpy(&v, &bits, 4);
  }
  ExpectSameAsReference(PlanOf({{0, 4096, 40}, {4096, 4096, 4000}}), sum,
                        residual, 1.0f);
  // Keys that differ only in their last 9 bits (the third round).
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = 0x3f800000u + static_cast<uint32_t>(rng() % 512);
    std::memcpy(&sum[i], &bits, 4);
  }
  ExpectSameAsReference(PlanOf({{0, 4096, 7}, {4096, 4096, 333}}), sum,
                        residual, 1.0f);
}

TEST(TopKImplTest, ANonFiniteValueStopsBeforeAnythingIsWritten) {
  const int64_t n = 100;
  std::vector<float> sum(n, 1.0f), residual(n, 0.5f);
  sum[70] = std::numeric_limits<float>::infinity();
  const std::vector<float> before = residual;
  std::vector<std::string> out = {"kept"};
  EXPECT_EQ(RunSteps(PlanOf({{0, 50, 5}, {50, 50, 5}}), sum, 1.0f, &residual,
                     16, false, &out) &
                kTopKNonFinite,
            kTopKNonFinite);
  EXPECT_EQ(residual, before);
  EXPECT_EQ(out, std::vector<std::string>{"kept"});
}

TEST(TopKImplTest, AHistogramThatCannotBeIsCaught) {
  // A histogram holding fewer keys than k (memory the launches did not
  // fill): the select says so instead of running off the bins.
  std::vector<uint32_t> hist(kTopKMaxBins, 0u);
  hist[5] = 3;
  TopKChunkState s;
  int bad = 0;
  TopKSelect(hist.data(), 0, 4, &s, &bad);
  EXPECT_EQ(bad, kTopKInconsistent);
  bad = 0;
  TopKSelect(hist.data(), 0, 3, &s, &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(s.prefix, 5u);
  EXPECT_EQ(s.need, 3);
}

}  // namespace
}  // namespace cuda_ops
}  // namespace asgd
