// Teacher-student soft targets for the CUDA backend's loss, as an
// element-wise pass over an Exec (layer_math.h): nvcc compiles it into the
// plugin (cuda_backend.cu runs it after the softmax cross-entropy kernel of a
// taught batch), the host compiler into loss_impl_test, which runs it on the
// CPU (HostExec) against the CPU backend's SoftmaxLoss (model/softmax_loss.h)
// on every machine.
//
// One op per row i of logits [rows, c] with teacher log-posteriors
// teacher[rows, c], w = teacher_weight, T = temperature, inv = 1 / labelled
// (model/backend.h Batch):
//   p  = softmax(z)          (into dlogits[i], then overwritten)
//   pT = softmax(z / T), qT = softmax(teacher / T)   (scratch[i, 2c])
//   dlogits[i][k] = ((1 - w) (p[k] - [k == label]) + w T (pT[k] - qT[k])) inv
//   row_loss[i]   = (1 - w) (-log max(p[label], 1e-30)) + w T² KL(qT || pT)
// and for an unlabelled row (label < 0) dlogits[i] = 0, row_loss[i] = 0; the
// same operations in the same order as SoftmaxLoss::Compute, so the two agree
// to the rounding of exp/log (expf on the device, std::exp on the host). A
// row's softmax runs serially over its c classes in one thread: a correct
// first kernel, not a fast one (c exponentials three times per row).
//
// Thread-safety: pure functions over Exec memory; an Exec's rules apply.
#ifndef ASGD_MODEL_CUDA_LOSS_IMPL_H_
#define ASGD_MODEL_CUDA_LOSS_IMPL_H_

#include <math.h>

#include <cstdint>

#include "absl/status/status.h"
#include "model/cuda/layer_math.h"

namespace asgd {
namespace cuda_ops {

// out = softmax(in / t) over c values, as SoftmaxLoss::SoftmaxRow: the max
// subtracted, the sum in float in index order.
ASGD_HD inline void SoftmaxInto(const float* in, int c, float t, float* out) {
  float mx = in[0];
  for (int k = 1; k < c; ++k) mx = in[k] > mx ? in[k] : mx;
  float sum = 0.0f;
  if (t == 1.0f) {
    for (int k = 0; k < c; ++k) sum += (out[k] = expf(in[k] - mx));
  } else {
    for (int k = 0; k < c; ++k) sum += (out[k] = expf((in[k] - mx) / t));
  }
  for (int k = 0; k < c; ++k) out[k] /= sum;
}

// Row i: writes dlogits[i], scratch[i] and row_loss[i] only.
struct SoftTargetRowOp {
  const float* logits;
  const float* teacher;
  const int32_t* labels;
  int c;
  float w, t, inv;
  float* scratch;  // [rows, 2c]
  float* dlogits;
  float* row_loss;

  ASGD_HD void operator()(int64_t i) const {
    float* d = dlogits + i * c;
    const int32_t label = labels[i];
    if (label < 0) {
      for (int k = 0; k < c; ++k) d[k] = 0.0f;
      row_loss[i] = 0.0f;
      return;
    }
    float* pt = scratch + i * 2 * c;
    float* qt = pt + c;
    SoftmaxInto(logits + i * c, c, 1.0f, d);
    SoftmaxInto(logits + i * c, c, t, pt);
    SoftmaxInto(teacher + i * c, c, t, qt);
    const float pl = d[label];
    const double hard = -logf(pl > 1e-30f ? pl : 1e-30f);  // in float, as there
    double kl = 0;
    for (int k = 0; k < c; ++k) {
      if (qt[k] > 0.0f) {
        const double ptk = static_cast<double>(pt[k]);
        kl += qt[k] * (log(static_cast<double>(qt[k])) -
                       log(ptk > 1e-30 ? ptk : 1e-30));
      }
      d[k] = ((1.0f - w) * (d[k] - (k == label ? 1.0f : 0.0f)) +
              w * t * (pt[k] - qt[k])) *
             inv;
    }
    row_loss[i] = static_cast<float>((1.0 - w) * hard +
                                     static_cast<double>(w) * t * t * kl);
  }
};

// The soft-target pass over `rows` rows (see the top of the file).
template <class Exec>
absl::Status SoftTargets(Exec& x, const float* logits, const float* teacher,
                         const int32_t* labels, int rows, int c, float w,
                         float t, float inv, float* scratch, float* dlogits,
                         float* row_loss) {
  return x.ForEach(rows, SoftTargetRowOp{logits, teacher, labels, c, w, t, inv,
                                         scratch, dlogits, row_loss});
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_LOSS_IMPL_H_
