// Server-side optimizers, applied by a shard's apply thread to its range.
//
// Plain SGD:      w -= lr * g
// Momentum SGD:   v = momentum * v + g;  w -= lr * v
//
// `g` is the gradient as pushed (already averaged over the worker's
// minibatch). `scale` multiplies the learning rate for this one update.
//
// Thread-safety: an Optimizer is immutable; Apply() may run concurrently on
// disjoint ranges. The caller owns w, v and g.
#ifndef ASGD_SERVER_OPTIMIZER_H_
#define ASGD_SERVER_OPTIMIZER_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace asgd {

struct OptimizerOptions {
  float learning_rate = 0.1f;
  float momentum = 0.0f;  // 0 selects plain SGD
};

class Optimizer {
 public:
  // InvalidArgument for a non-positive/non-finite learning rate or a
  // momentum outside [0, 1).
  static absl::StatusOr<Optimizer> Create(const OptimizerOptions& options);

  // True when Apply() reads and writes the per-element state `v`.
  bool has_state() const { return options_.momentum > 0.0f; }
  const OptimizerOptions& options() const { return options_; }

  // Updates w[0..n) (and v[0..n) if has_state()) with gradient g[0..n).
  void Apply(float* w, float* v, const float* g, int64_t n,
             float scale) const;

 private:
  explicit Optimizer(const OptimizerOptions& options) : options_(options) {}
  OptimizerOptions options_;
};

}  // namespace asgd

#endif  // ASGD_SERVER_OPTIMIZER_H_
