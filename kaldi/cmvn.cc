#include "kaldi/cmvn.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace asgd::kaldi {

absl::StatusOr<CmvnTransform> MakeCmvnTransform(const DoubleMatrix& stats,
                                                bool norm_vars,
                                                const DataLocation& where) {
  if (stats.rows != 2 || stats.cols < 2) {
    return BadDataError(BadDataReason::kBadCmvn, where,
                        absl::StrCat("CMVN statistics are ", stats.rows, " x ",
                                     stats.cols, ", not 2 x (dim + 1)"));
  }
  for (double v : stats.data) {
    if (!std::isfinite(v)) {
      return BadDataError(BadDataReason::kBadCmvn, where,
                          "CMVN statistics contain NaN or Inf");
    }
  }
  const int dim = stats.cols - 1;
  const double count = stats.at(0, dim);
  if (count < 1.0) {
    return BadDataError(BadDataReason::kBadCmvn, where,
                        absl::StrCat("CMVN statistics have a frame count of ",
                                     count, " (at least 1 needed)"));
  }
  CmvnTransform t;
  t.scale.assign(dim, 1.0f);
  t.offset.resize(dim);
  for (int d = 0; d < dim; ++d) {
    const double mean = stats.at(0, d) / count;
    if (!norm_vars) {
      t.offset[d] = ToReal<float>(-mean);
    } else {
      double var = stats.at(1, d) / count - mean * mean;
      if (var < 1.0e-20) var = 1.0e-20;
      const double scale = 1.0 / std::sqrt(var);
      t.scale[d] = ToReal<float>(scale);
      t.offset[d] = ToReal<float>(-mean * scale);
    }
    if (!std::isfinite(t.scale[d]) || !std::isfinite(t.offset[d])) {
      return BadDataError(BadDataReason::kBadCmvn, where,
                          absl::StrCat("the CMVN transform of dimension ", d,
                                       " is not finite in float"));
    }
  }
  return t;
}

void ApplyCmvn(const CmvnTransform& t, Matrix* features) {
  const int dim = t.dim();
  for (int32_t r = 0; r < features->rows; ++r) {
    float* x = features->row(r);
    for (int d = 0; d < dim; ++d) x[d] = x[d] * t.scale[d] + t.offset[d];
  }
}

void AccumulateCmvnStats(const Matrix& features, DoubleMatrix* stats) {
  const int dim = features.cols;
  if (stats->data.empty()) stats->Resize(2, dim + 1);
  for (int32_t r = 0; r < features.rows; ++r) {
    const float* x = features.row(r);
    for (int d = 0; d < dim; ++d) {
      stats->at(0, d) += x[d];
      stats->at(1, d) += static_cast<double>(x[d]) * x[d];
    }
    stats->at(0, dim) += 1.0;
  }
}

absl::StatusOr<DoubleMatrix> PoolSpeakerCmvnStats(
    const std::vector<DoubleMatrix>& speakers, const DataLocation& where) {
  if (speakers.empty()) {
    return BadDataError(BadDataReason::kBadCmvn, where,
                        "no speaker statistics to pool");
  }
  DoubleMatrix pooled;
  pooled.Resize(speakers[0].rows, speakers[0].cols);
  const int dim = speakers[0].cols - 1;
  for (const DoubleMatrix& s : speakers) {
    // The shape, the count and finiteness, as a transform needs them.
    absl::StatusOr<CmvnTransform> usable = MakeCmvnTransform(s, false, where);
    if (!usable.ok()) return usable.status();
    if (s.cols != pooled.cols) {
      return BadDataError(BadDataReason::kBadCmvn, where,
                          absl::StrCat("speaker statistics of dimension ",
                                       s.cols - 1, " and ", dim));
    }
    const double count = s.at(0, dim);
    for (int d = 0; d < dim; ++d) {
      pooled.at(1, d) += s.at(1, d) - s.at(0, d) * s.at(0, d) / count;
    }
    pooled.at(0, dim) += count;
  }
  return pooled;
}

}  // namespace asgd::kaldi
