#include "model/sparse_layer.h"

#include <algorithm>

namespace asgd {
namespace {

// Frames per tile of SparseAffine: a tile's transposed inputs (cols x 32
// floats: 256 KB for 2048 inputs) stay in the L2 cache.
constexpr int kTile = 32;

}  // namespace

SparseWeight SparseWeight::FromDense(const float* weight, int rows, int cols) {
  SparseWeight w;
  w.rows = rows;
  w.cols = cols;
  w.row_begin.reserve(rows + 1);
  w.row_begin.push_back(0);
  for (int r = 0; r < rows; ++r) {
    const float* row = weight + int64_t{r} * cols;
    for (int c = 0; c < cols; ++c) {
      if (row[c] != 0.0f || row[c] != row[c]) {  // NaN is kept
        w.col.push_back(c);
        w.value.push_back(row[c]);
      }
    }
    w.row_begin.push_back(static_cast<int64_t>(w.value.size()));
  }
  return w;
}

void SparseAffine(const SparseWeight& w, const float* bias, const float* h,
                  int64_t frames, float* out) {
  if (frames == 1) {  // one frame: a dot product per row, no transposition
    for (int r = 0; r < w.rows; ++r) {
      float acc = bias[r];
      for (int64_t k = w.row_begin[r]; k < w.row_begin[r + 1]; ++k) {
        acc += w.value[k] * h[w.col[k]];
      }
      out[r] = acc;
    }
    return;
  }
  std::vector<float> ht(int64_t{w.cols} * kTile);  // inputs of a tile, transposed
  for (int64_t f0 = 0; f0 < frames; f0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, frames - f0));
    for (int t = 0; t < n; ++t) {
      const float* hf = h + (f0 + t) * w.cols;
      for (int c = 0; c < w.cols; ++c) ht[int64_t{c} * kTile + t] = hf[c];
    }
    float acc[kTile];
    for (int r = 0; r < w.rows; ++r) {
      std::fill(acc, acc + kTile, bias[r]);
      for (int64_t k = w.row_begin[r]; k < w.row_begin[r + 1]; ++k) {
        const float v = w.value[k];
        const float* x = ht.data() + int64_t{w.col[k]} * kTile;
        for (int t = 0; t < kTile; ++t) acc[t] += v * x[t];
      }
      for (int t = 0; t < n; ++t) out[(f0 + t) * w.rows + r] = acc[t];
    }
  }
}

}  // namespace asgd
