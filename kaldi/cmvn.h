// Cepstral mean and variance normalisation as Kaldi's compute-cmvn-stats and
// apply-cmvn do it.
//
// Statistics of a speaker (cmvn.scp, one entry per speaker) are a 2 × (D+1)
// double matrix: row 0 holds the per-dimension sums and, in column D, the
// frame count; row 1 the per-dimension sums of squares (column D unused, 0).
// Normalising with them: x' = (x − mean), or with variance normalisation
// x' = (x − mean) / stddev, where mean = sum/count and
// var = sumsq/count − mean², floored at 1e-20 as Kaldi does.
//
//   ASGD_ASSIGN_OR_RETURN(
//       CmvnTransform t, MakeCmvnTransform(stats, /*norm_vars=*/false, where));
//   ApplyCmvn(t, &features);
//
// Thread-safety: the functions are reentrant; a CmvnTransform is a value.
#ifndef ASGD_KALDI_CMVN_H_
#define ASGD_KALDI_CMVN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kaldi/bad_data.h"
#include "kaldi/matrix.h"

namespace asgd::kaldi {

// x' = x · scale[d] + offset[d] for every frame.
struct CmvnTransform {
  std::vector<float> scale;
  std::vector<float> offset;
  int dim() const { return static_cast<int>(offset.size()); }
};

// A BadDataError kBadCmvn at `where` when `stats` is not 2 × (D+1), its
// count is below 1, or a value is not finite (Kaldi's own checks).
absl::StatusOr<CmvnTransform> MakeCmvnTransform(const DoubleMatrix& stats,
                                                bool norm_vars,
                                                const DataLocation& where);

// Normalises `features` (cols must be t.dim()) in place.
void ApplyCmvn(const CmvnTransform& t, Matrix* features);

// Adds the frames of `features` to `stats` (resized to 2 × (D+1) and zeroed
// when empty), as compute-cmvn-stats does.
void AccumulateCmvnStats(const Matrix& features, DoubleMatrix* stats);

// The statistics of several speakers' frames pooled after each speaker's
// own mean is removed: sums 0, sums of squares Σ_s (sumsq_s − sum_s²/n_s),
// count Σ n_s. Normalising with them (norm_vars) after per-speaker mean
// normalisation gives the features unit variance over the whole set (the
// global CMVN of Kaldi's nnet1 recipes after apply-cmvn --norm-vars=false).
// A kBadCmvn at `where` when there are none, they differ in shape, or one
// is not usable (as MakeCmvnTransform).
absl::StatusOr<DoubleMatrix> PoolSpeakerCmvnStats(
    const std::vector<DoubleMatrix>& speakers, const DataLocation& where);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_CMVN_H_
