#include "shrink/svd.h"

#include <cmath>
#include <cstddef>
#include <limits>

#include "absl/strings/str_cat.h"

// LAPACK (Fortran ABI, with the hidden length of the character argument).
extern "C" void dgesdd_(const char* jobz, const int* m, const int* n, double* a,
                        const int* lda, double* s, double* u, const int* ldu,
                        double* vt, const int* ldvt, double* work,
                        const int* lwork, int* iwork, int* info,
                        size_t jobz_len);

namespace asgd {

absl::StatusOr<Svd> ComputeSvd(absl::Span<const float> w, int64_t m,
                               int64_t n) {
  if (m < 1 || n < 1 || m * n > (int64_t{1} << 28) ||
      static_cast<int64_t>(w.size()) != m * n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SVD of a ", m, " x ", n, " matrix given ", w.size(),
        " values (both sizes >= 1, at most 2^28 values)"));
  }
  for (float v : w) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError("SVD of a matrix with NaN or Inf");
    }
  }
  // The row-major m × n W is, read column-major, A = Wᵀ (n × m). LAPACK's
  // A = U_a S V_aᵀ gives W = V_a S U_aᵀ, and its column-major outputs are
  // already the row-major factors of W: V_aᵀ (k × m, column-major) holds
  // U_w (m × k, row-major), U_a (n × k, column-major) holds Vᵀ_w (k × n,
  // row-major).
  Svd r;
  r.m = m;
  r.n = n;
  r.k = std::min(m, n);
  std::vector<double> a(w.begin(), w.end());
  r.s.resize(r.k);
  r.u.resize(m * r.k);
  r.vt.resize(r.k * n);
  const int lm = static_cast<int>(n);  // LAPACK's rows
  const int ln = static_cast<int>(m);  // LAPACK's columns
  const int lk = static_cast<int>(r.k);
  std::vector<int> iwork(8 * r.k);
  int info = 0;
  int lwork = -1;
  double query = 0;
  // A's left singular vectors (LAPACK U, lm × k) go to r.vt, its right
  // ones (LAPACK Vᵀ, k × ln) to r.u.
  dgesdd_("S", &lm, &ln, a.data(), &lm, r.s.data(), r.vt.data(), &lm,
          r.u.data(), &lk, &query, &lwork, iwork.data(), &info, 1);
  if (info != 0 || !(query >= 1) ||
      query > static_cast<double>(std::numeric_limits<int>::max())) {
    return absl::InternalError(
        absl::StrCat("LAPACK dgesdd workspace query failed (info ", info, ")"));
  }
  lwork = static_cast<int>(query);
  std::vector<double> work(lwork);
  dgesdd_("S", &lm, &ln, a.data(), &lm, r.s.data(), r.vt.data(), &lm,
          r.u.data(), &lk, work.data(), &lwork, iwork.data(), &info, 1);
  if (info != 0) {
    return absl::InternalError(absl::StrCat(
        "LAPACK dgesdd did not converge on a ", m, " x ", n,
        " matrix (info ", info, ")"));
  }
  return r;
}

}  // namespace asgd
