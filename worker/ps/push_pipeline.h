// PushPipeline: how a worker's gradients reach the pool: it sums the
// gradients of minibatches and pushes their average (with the versions of
// the oldest model in the sum) every push_every minibatches, either now
// (the caller waits for the wire) or, with `background`, on another thread
// while the next minibatches compute (SPEECH3: "if the PS is busy, compute
// another minibatch"). While a background push is on the wire the sum keeps
// growing, up to max_minibatches; then the pipeline is due and the caller
// waits for the wire.
//
//   PushPipeline pipeline(size, options, push_fn);
//   ... each minibatch:
//   if (pipeline.Landed()) Book(pipeline.Collect());
//   pipeline.Add(grad, versions);
//   if (pipeline.Due()) {
//     Book(pipeline.Collect());  // waits for the push on the wire, if any
//     pipeline.Start();
//     if (!background) Book(pipeline.Collect());
//   }
//
// Resident sums: when the backend sums the gradients itself (the resident
// model of model/backend.h), the pipeline only counts them (Count) and, at
// Start(), calls the caller's take function on the caller's thread to move
// that sum into what the push function then sends (it is handed an empty
// span). A take that fails starts no push.
//
// What to do with an outcome (count it, retry, pull) is the caller's: the
// pipeline only moves gradients. The push function is the caller's one
// call into the pool; it runs on the pipeline's thread with `background`,
// else on the caller's.
//
// Thread-safety: all methods from one thread (the worker's). The push
// function may run on another thread, concurrently with the caller, with a
// buffer the pipeline does not touch until Collect() returned its outcome.
// The destructor waits for a push in flight.
#ifndef ASGD_WORKER_PS_PUSH_PIPELINE_H_
#define ASGD_WORKER_PS_PUSH_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/ps/param_client.h"

namespace asgd {

struct PushPipelineOptions {
  int push_every = 1;      // minibatches per push (>= 1)
  bool background = false;  // push while the next minibatches compute
  // With background: the most minibatches in one push (>= push_every).
  int max_minibatches = 1;
};

class PushPipeline {
 public:
  // Sends `average` (of `num_minibatches` minibatches, computed from the
  // model of `versions`) to the pool.
  using PushFn = std::function<absl::StatusOr<PushOutcome>(
      absl::Span<const float> average, const std::vector<uint64_t>& versions,
      int num_minibatches)>;

  // Prepares the push of the sum's `num_minibatches` (resident sums).
  using TakeFn = std::function<absl::Status(int num_minibatches)>;

  PushPipeline(int64_t size, const PushPipelineOptions& options, PushFn push);
  // Resident sums: the gradients are summed elsewhere and taken by `take`.
  PushPipeline(const PushPipelineOptions& options, TakeFn take, PushFn push);
  ~PushPipeline();
  PushPipeline(const PushPipeline&) = delete;
  PushPipeline& operator=(const PushPipeline&) = delete;

  // Adds one minibatch's gradient (`size` floats), computed from the model
  // of `versions`.
  void Add(absl::Span<const float> grad, const std::vector<uint64_t>& versions);
  // Resident sums: one more minibatch was summed, computed from the model of
  // `versions`.
  void Count(const std::vector<uint64_t>& versions);
  // Minibatches added since the last Start().
  int pending() const { return pending_; }
  // True when a push was started and has completed (Collect() will not
  // wait).
  bool Landed() const;
  // True when a push should start now: push_every minibatches are pending,
  // and no background push is on the wire or max_minibatches are pending.
  bool Due() const;
  // Starts pushing the average of the pending minibatches. Requires
  // pending() > 0 and no push uncollected (Collect() first). The take
  // function's error, with no push started (the pending count is cleared:
  // the sum is the take function's to clear).
  absl::Status Start();
  // The outcome of the push started last (waiting for it if it is on the
  // wire); nullopt when there is none to collect.
  std::optional<absl::StatusOr<PushOutcome>> Collect();

 private:
  const PushPipelineOptions options_;
  const TakeFn take_;  // resident sums only
  const PushFn push_;
  std::vector<float> sum_;
  std::vector<float> outgoing_;  // the push function's while in flight
  int pending_ = 0;
  std::vector<uint64_t> sum_versions_;  // of the oldest model in the sum
  std::optional<std::future<absl::StatusOr<PushOutcome>>> in_flight_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_PUSH_PIPELINE_H_
