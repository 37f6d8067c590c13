#include "kaldi/cmvn.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace asgd::kaldi {
namespace {

Matrix RandomFeatures(int rows, int cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(2.0f, 3.0f);
  Matrix m;
  m.Resize(rows, cols);
  for (float& v : m.data) v = normal(rng);
  return m;
}

TEST(CmvnTest, StatsAreSumsSquaresAndCount) {
  Matrix m;
  m.Resize(2, 2);
  m.data = {1, 2, 3, 5};
  DoubleMatrix stats;
  AccumulateCmvnStats(m, &stats);
  AccumulateCmvnStats(m, &stats);
  ASSERT_EQ(stats.rows, 2);
  ASSERT_EQ(stats.cols, 3);
  EXPECT_EQ(stats.data, std::vector<double>({8, 14, 4, 20, 58, 0}));
}

// Against a plain reference: per dimension, subtract the mean (and divide by
// the standard deviation) computed in double from the frames themselves.
TEST(CmvnTest, NormalisesAsTheReference) {
  const Matrix feats = RandomFeatures(500, 6, 1);
  DoubleMatrix stats;
  AccumulateCmvnStats(feats, &stats);
  for (bool norm_vars : {false, true}) {
    auto t = MakeCmvnTransform(stats, norm_vars, {});
    ASSERT_TRUE(t.ok());
    Matrix got = feats;
    ApplyCmvn(*t, &got);
    for (int d = 0; d < 6; ++d) {
      double sum = 0, sumsq = 0;
      for (int r = 0; r < 500; ++r) sum += feats.at(r, d);
      const double mean = sum / 500;
      for (int r = 0; r < 500; ++r) {
        sumsq += (feats.at(r, d) - mean) * (feats.at(r, d) - mean);
      }
      const double stddev = std::sqrt(sumsq / 500);
      for (int r = 0; r < 500; ++r) {
        const double want = norm_vars ? (feats.at(r, d) - mean) / stddev
                                      : feats.at(r, d) - mean;
        ASSERT_NEAR(got.at(r, d), want, 1e-4) << d << " " << norm_vars;
      }
    }
  }
}

// Pooled speaker statistics against a reference: each speaker's frames
// minus that speaker's mean, then the variance over all of them, in double.
TEST(CmvnTest, PooledSpeakerStatsNormaliseTheSetAfterPerSpeakerMeans) {
  std::vector<Matrix> speakers = {RandomFeatures(300, 4, 1),
                                  RandomFeatures(120, 4, 2),
                                  RandomFeatures(40, 4, 3)};
  for (float& v : speakers[1].data) v = 3 * v + 7;  // another mean and scale
  std::vector<DoubleMatrix> stats(speakers.size());
  for (size_t s = 0; s < speakers.size(); ++s) {
    AccumulateCmvnStats(speakers[s], &stats[s]);
  }
  auto pooled = PoolSpeakerCmvnStats(stats, {});
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  EXPECT_EQ(pooled->at(0, 4), 460);
  auto global = MakeCmvnTransform(*pooled, /*norm_vars=*/true, {});
  ASSERT_TRUE(global.ok());
  for (int d = 0; d < 4; ++d) {
    double sumsq = 0;
    for (const Matrix& m : speakers) {
      double mean = 0;
      for (int r = 0; r < m.rows; ++r) mean += m.at(r, d) / m.rows;
      for (int r = 0; r < m.rows; ++r) {
        sumsq += (m.at(r, d) - mean) * (m.at(r, d) - mean);
      }
    }
    EXPECT_NEAR(global->scale[d], 1 / std::sqrt(sumsq / 460), 1e-5) << d;
    EXPECT_NEAR(global->offset[d], 0, 1e-9) << d;
  }
  EXPECT_FALSE(PoolSpeakerCmvnStats({}, {}).ok());
  DoubleMatrix narrow;
  AccumulateCmvnStats(RandomFeatures(10, 3, 4), &narrow);
  stats.push_back(narrow);
  EXPECT_EQ(BadDataReasonOf(PoolSpeakerCmvnStats(stats, {}).status()),
            BadDataReason::kBadCmvn);
}

TEST(CmvnTest, BadStatsAreRefused) {
  DoubleMatrix stats;
  stats.Resize(2, 3);
  stats.data = {1, 2, 0.5, 1, 4, 0};  // count 0.5 < 1
  EXPECT_EQ(BadDataReasonOf(MakeCmvnTransform(stats, false, {}).status()),
            BadDataReason::kBadCmvn);
  stats.data[2] = 10;
  stats.data[0] = NAN;
  EXPECT_EQ(BadDataReasonOf(MakeCmvnTransform(stats, false, {}).status()),
            BadDataReason::kBadCmvn);
  DoubleMatrix wrong;
  wrong.Resize(3, 3);
  EXPECT_EQ(BadDataReasonOf(MakeCmvnTransform(wrong, false, {}).status()),
            BadDataReason::kBadCmvn);
  // A constant dimension: variance floored (1e-20), not a division by zero.
  stats.data = {20, 0, 10, 40, 0, 0};
  auto t = MakeCmvnTransform(stats, true, {});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(std::isfinite(t->scale[1]));
}

}  // namespace
}  // namespace asgd::kaldi
