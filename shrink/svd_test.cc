#include "shrink/svd.h"

#include <cmath>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

std::vector<float> RandomMatrix(int64_t m, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(m * n);
  for (float& v : w) v = u(rng);
  return w;
}

// The plain reference: U diag(s) Vᵀ, orthonormality, order.
void ExpectDecomposes(const std::vector<float>& w, const Svd& svd) {
  const int64_t m = svd.m, n = svd.n, k = svd.k;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double v = 0;
      for (int64_t p = 0; p < k; ++p) {
        v += svd.u[i * k + p] * svd.s[p] * svd.vt[p * n + j];
      }
      ASSERT_NEAR(v, w[i * n + j], 1e-9) << i << "," << j;
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    if (p > 0) {
      EXPECT_GE(svd.s[p - 1], svd.s[p]);
    }
    EXPECT_GE(svd.s[p], 0.0);
    for (int64_t q = 0; q < k; ++q) {
      double uu = 0, vv = 0;
      for (int64_t i = 0; i < m; ++i) uu += svd.u[i * k + p] * svd.u[i * k + q];
      for (int64_t j = 0; j < n; ++j) vv += svd.vt[p * n + j] * svd.vt[q * n + j];
      EXPECT_NEAR(uu, p == q ? 1.0 : 0.0, 1e-12);
      EXPECT_NEAR(vv, p == q ? 1.0 : 0.0, 1e-12);
    }
  }
}

TEST(SvdTest, DecomposesTallWideAndSquareMatrices) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{37, 23}, {23, 37}, {16, 16},
                      {1, 9}, {9, 1}}) {
    SCOPED_TRACE(testing::Message() << m << " x " << n);
    const std::vector<float> w = RandomMatrix(m, n, m * 100 + n);
    absl::StatusOr<Svd> svd = ComputeSvd(w, m, n);
    ASSERT_TRUE(svd.ok()) << svd.status();
    EXPECT_EQ(svd->k, std::min(m, n));
    ExpectDecomposes(w, *svd);
  }
}

TEST(SvdTest, FindsKnownSingularValues) {
  // W = P diag(5, 3, 0.5) Qᵀ with P, Q signed permutations (orthogonal).
  const int64_t m = 4, n = 3;
  std::vector<float> w(m * n, 0.0f);
  w[2 * n + 0] = -5.0f;  // row 2, column 0
  w[0 * n + 2] = 3.0f;
  w[3 * n + 1] = 0.5f;
  absl::StatusOr<Svd> svd = ComputeSvd(w, m, n);
  ASSERT_TRUE(svd.ok()) << svd.status();
  ASSERT_EQ(svd->s.size(), 3u);
  EXPECT_NEAR(svd->s[0], 5.0, 1e-12);
  EXPECT_NEAR(svd->s[1], 3.0, 1e-12);
  EXPECT_NEAR(svd->s[2], 0.5, 1e-12);
  ExpectDecomposes(w, *svd);
}

TEST(SvdTest, RefusesBadInput) {
  const std::vector<float> w = RandomMatrix(3, 4, 1);
  EXPECT_EQ(ComputeSvd(w, 4, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeSvd(w, 0, 12).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> nan = w;
  nan[5] = std::nanf("");
  EXPECT_EQ(ComputeSvd(nan, 3, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
