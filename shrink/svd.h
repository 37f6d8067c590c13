// Thin singular value decomposition of a weight matrix, for factoring a
// layer into two thin ones (low_rank.h).
//
// W (m × n, row-major float, as model tensors are stored) = U · diag(s) · Vᵀ
// with k = min(m, n), U (m × k) and Vᵀ (k × n) row-major with orthonormal
// columns / rows, and s descending and non-negative. Computed in double
// precision by LAPACK's dgesdd (the LAPACK inside Debian's OpenBLAS).
//
// Thread-safety: a pure function.
#ifndef ASGD_SHRINK_SVD_H_
#define ASGD_SHRINK_SVD_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace asgd {

struct Svd {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;             // min(m, n)
  std::vector<double> u;     // [m, k]
  std::vector<double> s;     // [k], descending
  std::vector<double> vt;    // [k, n]
};

// InvalidArgument when m or n < 1, w does not hold m * n values, a value is
// not finite, or m * n exceeds 2^28 (a 1 GiB double copy per factor);
// Internal when LAPACK does not converge.
absl::StatusOr<Svd> ComputeSvd(absl::Span<const float> w, int64_t m,
                               int64_t n);

}  // namespace asgd

#endif  // ASGD_SHRINK_SVD_H_
