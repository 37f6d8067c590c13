// The dense matrix the Kaldi readers fill: rows × cols values, row-major,
// owned by the struct. Matrix holds float (features, log-likelihoods),
// DoubleMatrix holds double (CMVN statistics). Posterior is Kaldi's sparse
// per-frame (id, weight) lists.
//
// Thread-safety: a plain value type.
#ifndef ASGD_KALDI_MATRIX_H_
#define ASGD_KALDI_MATRIX_H_

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace asgd::kaldi {

template <typename Real>
struct BasicMatrix {
  int32_t rows = 0;
  int32_t cols = 0;
  std::vector<Real> data;  // rows * cols

  Real* row(int32_t r) { return data.data() + int64_t{r} * cols; }
  const Real* row(int32_t r) const { return data.data() + int64_t{r} * cols; }
  Real& at(int32_t r, int32_t c) { return data[int64_t{r} * cols + c]; }
  Real at(int32_t r, int32_t c) const { return data[int64_t{r} * cols + c]; }
  void Resize(int32_t new_rows, int32_t new_cols) {
    rows = new_rows;
    cols = new_cols;
    data.assign(static_cast<size_t>(int64_t{new_rows} * new_cols), Real(0));
  }
};

// A value converted to Real; a double beyond float's range becomes ±Inf
// (a plain cast would be undefined behaviour), NaN stays NaN.
template <typename Real>
inline Real ToReal(double v) {
  if constexpr (std::is_same_v<Real, float>) {
    constexpr double kMax = std::numeric_limits<float>::max();
    if (v > kMax) return std::numeric_limits<float>::infinity();
    if (v < -kMax) return -std::numeric_limits<float>::infinity();
  }
  return static_cast<Real>(v);
}

using Matrix = BasicMatrix<float>;
using DoubleMatrix = BasicMatrix<double>;

// Kaldi's Posterior (hmm/posterior.h): per frame, (id, weight) pairs, as
// ali-to-post, lattice-to-post and post-to-pdf-post write them. The ids are
// whatever the writer put there (transition ids or pdf ids); the readers do
// not check the weights (callers check what they use).
using Posterior = std::vector<std::vector<std::pair<int32_t, float>>>;

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_MATRIX_H_
