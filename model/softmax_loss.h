// The output's loss on the CPU: softmax over each head's logits, the
// cross-entropy against the labels (with a teacher's soft targets mixed in,
// see Batch), and its gradient with respect to the logits. The CPU backend
// (cpu_backend.cc) runs it after its layers' forward pass; a pipeline's last
// stage (model/layer_range.h) after its own.
//
// Rows: `batch`'s rows × output_frames heads of num_classes logits each, in
// the order of batch.labels. The gradient is (p - onehot) / labelled per
// labelled head (with a teacher, (1 - w)(p - onehot) + w T (p_T - q_T), over
// labelled), zero on unlabelled heads; the loss is the mean over labelled
// heads.
//
// Thread-safety: a SoftmaxLoss owns scratch memory (a taught batch's soft
// targets); one thread at a time.
#ifndef ASGD_MODEL_SOFTMAX_LOSS_H_
#define ASGD_MODEL_SOFTMAX_LOSS_H_

#include <vector>

#include "model/backend.h"
#include "model/model_spec.h"

namespace asgd {

class SoftmaxLoss {
 public:
  explicit SoftmaxLoss(const ModelSpec& spec) : spec_(spec) {}

  // `logits` (rows × output_dim floats) are replaced by the softmax
  // probabilities; `dlogits` (as many floats) gets the loss's gradient.
  // The batch was checked by the caller (batch_check.h).
  BatchResult Compute(const Batch& batch, float* logits, float* dlogits);

  // row = softmax(row / t), c classes.
  static void SoftmaxRow(float* row, int c, float t);

 private:
  // Per head of a taught batch, from the logits: p_T = softmax(z / T) and
  // q_T = softmax(teacher / T), side by side in soft_.
  void SoftTargets(const Batch& batch, const float* logits);

  const ModelSpec spec_;
  std::vector<float> soft_;
};

}  // namespace asgd

#endif  // ASGD_MODEL_SOFTMAX_LOSS_H_
