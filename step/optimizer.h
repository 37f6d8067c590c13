// The optimizer step: applied by a server shard's apply thread to its range,
// and replayed by a worker on its copy of the model (delta pulls,
// worker/ps/delta_receiver.h).
//
// Exact replay. The worker's replay of an update is bit for bit the server's
// apply: given the same inputs (w, v, g, backup, options, step and scale),
// Apply() leaves the same float32 bits on every build and machine, because
// both sides run this code, the same IEEE 754 float32 operations in the same
// order, each product and each sum rounded on its own. That holds only while
//   - no multiply-add is contracted into a fused multiply-add (one rounding
//     instead of two). GCC (-ffp-contract=fast) and Clang (-ffp-contract=on)
//     contract by default as soon as the target has FMA (-march=x86-64-v3 or
//     native, -mfma, AArch64), so the step libraries build with
//     -ffp-contract=off (step/BUILD);
//   - no fast-math: -ffast-math (-Ofast, -fassociative-math, ...) lets the
//     compiler reorder sums and take other vector paths. The step libraries
//     build with -fno-fast-math, and their sources refuse to compile when
//     __FAST_MATH__ is defined;
//   - the operations run in the order written below: another association of
//     the same terms (a different summation order, a rewrite that is equal
//     in exact arithmetic) gives other floats;
//   - the floating-point environment is the default one: round to nearest,
//     subnormals kept (no flush-to-zero; a program linked with -ffast-math
//     sets FTZ/DAZ for the whole process);
//   - both sides use the same float32 learning rate (LearningRate());
//   - code that replays on a GPU keeps the same rules: nvcc contracts
//     a * b + c into an FMA by default, so device code must use __fmul_rn /
//     __fadd_rn (or build with -fmad=false), without --use_fast_math or
//     -ftz=true.
// step/exact_replay_test.cc checks it where it breaks: on inputs where a
// fused step gives another float, Apply() must give the separately rounded
// one (exact_replay_fma_test shows that a contracted build fails that).
// Within one build the vectorized loops, their scalar remainders and the
// special cases below compute the same values as the general loop.
//
// The step.
//
// With g the pushed gradient (already averaged over the worker's
// minibatches), w the weights, v the momentum buffer and lr_t the scheduled
// learning rate times the update's scale:
//
//   delay compensation (DC-ASGD, Zheng et al. 2017), if dc_lambda > 0:
//       g = g + dc_lambda * g * g * (w - w_backup)
//     where w_backup is the model the worker computed g from;
//   gradient decay (weight decay on the server):  g = g + weight_decay * w
//   plain SGD      (momentum == 0):  w -= lr_t * g
//   momentum SGD:                     v = momentum * v + g;  w -= lr_t * v
//   Nesterov momentum (nesterov):     v = momentum * v + g;
//                                     w -= lr_t * (g + momentum * v)
//
// Learning-rate schedule over the server step t (updates applied so far):
//   constant:     lr_t = lr
//   step:         lr_t = lr * gamma ^ floor(t / step_size)
//   exponential:  lr_t = lr * gamma ^ (t / step_size)
//
// Keeping the model finite: Apply() also returns the largest |w| and |v| it
// left behind (taken in the same loop, nearly free: the loops are bound by
// memory bandwidth). StepBound() turns such maxima and the largest |g| of a
// gradient into an upper bound of what one step can produce, in double
// precision; when it stays under kMaxMagnitude the step is provably finite.
// Otherwise StaysBounded() runs the exact arithmetic of Apply() read-only and
// says whether every result would stay within kMaxMagnitude.
//
// Thread-safety: an Optimizer is immutable; Apply() may run concurrently on
// disjoint ranges. The caller owns every buffer.
#ifndef ASGD_STEP_OPTIMIZER_H_
#define ASGD_STEP_OPTIMIZER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd {

enum class LrSchedule { kConstant, kStep, kExponential };
absl::StatusOr<LrSchedule> ParseLrSchedule(absl::string_view text);

struct OptimizerOptions {
  float learning_rate = 0.1f;
  float momentum = 0.0f;  // 0 selects plain SGD
  bool nesterov = false;  // needs momentum > 0
  float weight_decay = 0.0f;
  float dc_lambda = 0.0f;  // DC-ASGD delay compensation; 0 disables
  LrSchedule schedule = LrSchedule::kConstant;
  int64_t step_size = 1000;  // schedule period in server steps
  float gamma = 0.5f;        // schedule decay factor
};

// The largest magnitude a weight or momentum value may take: far below
// FLT_MAX (3.4e38), so that the bounds below keep a wide margin for rounding.
inline constexpr double kMaxMagnitude = 1e37;

// One update's parameters beyond the gradient.
struct UpdateContext {
  float scale = 1.0f;               // multiplies the learning rate
  uint64_t step = 0;                // server step, for the schedule
  const float* backup = nullptr;    // the worker's model (DC-ASGD), or null
  // A pruned model's mask (model/prune_mask.h), or null: flags aligned with
  // w; an element whose flag is 0 takes gradient 0, whatever was pushed.
  // A pruned weight is 0 with momentum 0, and every rule above then leaves
  // it exactly 0 (0 - lr * (0 + wd * 0) = 0; v = mu * 0 + 0; DC's term is
  // a product with g = 0), so it is never even transiently non-zero.
  const uint8_t* keep = nullptr;
};

// What Apply() left behind: max |w| and max |v| over the range (v: 0 without
// state).
struct ApplyStats {
  float max_abs_w = 0.0f;
  float max_abs_v = 0.0f;
};

// Upper bounds (magnitudes) going into one step: the weights, the momentum
// state, the gradient and (DC-ASGD) the worker's model.
struct StepInputs {
  double max_w = 0;
  double max_v = 0;
  double max_g = 0;
  double max_backup = -1;  // < 0: no backup (no delay compensation)
  double scale = 1;        // the update's learning-rate multiplier
};

// Upper bounds after the step, and of every intermediate value.
struct StepBound {
  double max_w = 0;
  double max_v = 0;
  // The most one element of w can move (lr * the direction), and the
  // largest compensated gradient (what one element of v can grow by).
  double w_step = 0;
  double g_eff = 0;
  // The largest intermediate value (compensated gradient, products).
  double max_intermediate = 0;
  // True when every bound stays under kMaxMagnitude: the step is finite.
  bool safe() const {
    return max_w < kMaxMagnitude && max_v < kMaxMagnitude &&
           max_intermediate < kMaxMagnitude;
  }
};

class Optimizer {
 public:
  // InvalidArgument for a non-positive/non-finite learning rate, momentum
  // outside [0, 1), Nesterov without momentum, negative decay or lambda, or a
  // schedule with step_size < 1 or gamma outside (0, 1].
  static absl::StatusOr<Optimizer> Create(const OptimizerOptions& options);

  // True when Apply() reads and writes the per-element state `v`.
  bool has_state() const { return options_.momentum > 0.0f; }
  bool needs_backup() const { return options_.dc_lambda > 0.0f; }
  const OptimizerOptions& options() const { return options_; }

  // The scheduled learning rate at server step `step`.
  float LearningRate(uint64_t step) const;

  // Updates w[0..n) (and v[0..n) if has_state()) with gradient g[0..n).
  // ctx.backup and ctx.keep, when set, point at n values. Returns the
  // maxima after it. With ctx.keep the step runs in blocks on a masked copy
  // of g (the same values elementwise as the unmasked step of the kept
  // elements).
  ApplyStats Apply(float* w, float* v, const float* g, int64_t n,
                   const UpdateContext& ctx) const;

  // True when Apply() with these arguments would leave every w and v finite
  // and within kMaxMagnitude. Reads only; the same arithmetic as Apply().
  bool StaysBounded(const float* w, const float* v, const float* g, int64_t n,
                    const UpdateContext& ctx) const;

  // An upper bound of what one step can produce from inputs bounded by
  // `in` (any step of the schedule: the learning rate only decays).
  StepBound Bound(const StepInputs& in) const;

 private:
  explicit Optimizer(const OptimizerOptions& options) : options_(options) {}
  OptimizerOptions options_;
};

}  // namespace asgd

#endif  // ASGD_STEP_OPTIMIZER_H_
