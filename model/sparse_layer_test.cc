// SparseWeight / SparseAffine: the stored non-zeros are exactly the dense
// matrix's, and the product equals a double-precision sum for one frame,
// fewer frames than a tile, and several tiles with a partial last one.
#include "model/sparse_layer.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(SparseLayerTest, KeepsExactlyTheNonZeros) {
  const std::vector<float> dense = {0, 1.5f, 0, -2, 0, 0, 0, 0, NAN};  // 3x3
  const SparseWeight w = SparseWeight::FromDense(dense.data(), 3, 3);
  EXPECT_EQ(w.nonzeros(), 3);
  EXPECT_EQ(w.row_begin, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(w.col, (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(w.value[0], 1.5f);
  EXPECT_EQ(w.value[1], -2.0f);
  EXPECT_TRUE(std::isnan(w.value[2]));  // a NaN is not dropped as a zero
  EXPECT_EQ(w.bytes(), 3 * 8 + 4 * 8);
}

TEST(SparseLayerTest, ProductEqualsADirectSum) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int rows = 19, cols = 45;
  std::vector<float> dense(rows * cols), bias(rows);
  for (float& x : dense) x = u(rng) < -0.4f ? u(rng) : 0.0f;  // ~30% non-zero
  for (int c = 0; c < cols; ++c) dense[7 * cols + c] = 0.0f;  // an empty row
  for (float& x : bias) x = u(rng);
  const SparseWeight w = SparseWeight::FromDense(dense.data(), rows, cols);
  EXPECT_GT(w.nonzeros(), 0);
  EXPECT_LT(w.nonzeros(), rows * cols / 2);
  for (int64_t frames : {1, 5, 32, 70}) {
    SCOPED_TRACE(frames);
    std::vector<float> h(frames * cols), out(frames * rows, NAN);
    for (float& x : h) x = u(rng);
    SparseAffine(w, bias.data(), h.data(), frames, out.data());
    for (int64_t f = 0; f < frames; ++f) {
      for (int r = 0; r < rows; ++r) {
        double want = bias[r];
        for (int c = 0; c < cols; ++c) {
          want += double{dense[r * cols + c]} * h[f * cols + c];
        }
        ASSERT_NEAR(out[f * rows + r], want, 1e-5)
            << "frame " << f << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace asgd
