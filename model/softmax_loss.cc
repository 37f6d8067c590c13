#include "model/softmax_loss.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace asgd {

BatchResult SoftmaxLoss::Compute(const Batch& batch, float* logits,
                                 float* dlogits) {
  const bool taught = !batch.teacher.empty();
  if (taught) SoftTargets(batch, logits);  // from the logits
  // A multi-frame model's logits [rows, k * c] are rows * k heads of c
  // classes each, in the order of the labels: every head is a row here.
  const int n = batch.rows() * spec_.output_frames;
  const int c = spec_.num_classes;
  for (int i = 0; i < n; ++i) SoftmaxRow(logits + int64_t{i} * c, c, 1.0f);
  // Softmax output: loss, accuracy, and dZ = (p - onehot) / labelled,
  // zero on unlabelled heads (with a teacher, see Batch).
  const float* probs = logits;
  BatchResult result;
  for (int i = 0; i < n; ++i) result.labelled += batch.labels[i] != kNoLabel;
  const float inv = result.labelled > 0 ? 1.0f / result.labelled : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float* p = probs + int64_t{i} * c;
    float* d = dlogits + int64_t{i} * c;
    const int32_t label = batch.labels[i];
    if (label == kNoLabel) {
      std::fill(d, d + c, 0.0f);
      continue;
    }
    result.correct += (std::max_element(p, p + c) - p) == label;
    const double hard = -std::log(std::max(p[label], 1e-30f));
    if (!taught) {
      result.loss += hard;
      for (int k = 0; k < c; ++k) d[k] = (p[k] - (k == label ? 1.0f : 0.0f)) * inv;
      continue;
    }
    const float w = batch.teacher_weight;
    const float t = batch.temperature;
    const float* pt = soft_.data() + int64_t{i} * 2 * c;  // p_T, then q_T
    const float* qt = pt + c;
    double kl = 0;
    for (int k = 0; k < c; ++k) {
      if (qt[k] > 0.0f) {
        kl += qt[k] * (std::log(double{qt[k]}) -
                       std::log(std::max(double{pt[k]}, 1e-30)));
      }
      d[k] = ((1.0f - w) * (p[k] - (k == label ? 1.0f : 0.0f)) +
              w * t * (pt[k] - qt[k])) * inv;
    }
    result.loss += (1.0 - w) * hard + double{w} * t * t * kl;
  }
  if (result.labelled > 0) result.loss /= result.labelled;
  return result;
}

void SoftmaxLoss::SoftTargets(const Batch& batch, const float* logits) {
  const int c = spec_.num_classes;
  const int heads = batch.rows() * spec_.output_frames;
  soft_.resize(int64_t{heads} * 2 * c);
  for (int i = 0; i < heads; ++i) {
    float* pt = soft_.data() + int64_t{i} * 2 * c;
    std::copy_n(logits + int64_t{i} * c, c, pt);
    std::copy_n(batch.teacher.data() + int64_t{i} * c, c, pt + c);
    SoftmaxRow(pt, c, batch.temperature);
    SoftmaxRow(pt + c, c, batch.temperature);
  }
}

void SoftmaxLoss::SoftmaxRow(float* row, int c, float t) {
  const float mx = *std::max_element(row, row + c);
  float sum = 0.0f;
  if (t == 1.0f) {
    for (int k = 0; k < c; ++k) sum += (row[k] = std::exp(row[k] - mx));
  } else {
    for (int k = 0; k < c; ++k) sum += (row[k] = std::exp((row[k] - mx) / t));
  }
  for (int k = 0; k < c; ++k) row[k] /= sum;
}

}  // namespace asgd
