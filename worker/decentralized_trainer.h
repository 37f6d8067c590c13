// DecentralizedTrainer: a worker's training loop when the workers train
// among themselves instead of through the parameter servers. Each worker
// holds its own model (a PeerModel, which its peer service may average with
// other workers' at any moment) and its own part of the data.
//
// Modes (DecentralizedMode):
//  * kAdpsgd, asynchronous decentralized parallel SGD: every step computes a
//    minibatch gradient g on a copy of the local model, averages the model
//    with a peer's (adpsgd.h; topology fixed or random ring), then applies
//    x -= lr * g. No worker waits for another beyond its own exchange, so a
//    slow worker slows only the exchanges it takes part in. With
//    delay_by_one the averaging and the update of step t run on a second
//    thread while the gradient of step t is computed, and the update applies
//    the gradient of step t-1, computed on the previous iteration's weights:
//    x_{t+1} = W_t x_t - lr * g(x_{t-1}). Communication then hides fully
//    behind computation.
//  * kAllreduce, the synchronous baseline: every step computes a gradient,
//    sums it over all workers with a ring allreduce (allreduce.h) and
//    applies x -= lr * sum / n; every worker keeps bitwise the same model.
//    Every worker runs exactly max_steps steps (epochs are ignored: a
//    worker's data simply wraps around); a dead worker stops the others with
//    an error at the allreduce deadline.
//
// kAdpsgd ends after max_steps steps or when this worker's epochs are used
// up, whichever comes first. Reported like the parameter-server trainer:
// TrainerObserver::OnStep per step (push_seconds: time blocked on peers),
// and in the log (lines wrapped here) held-out evaluations, where the
// version is the step count,
//   worker 0 eval t=12.3 frames=51200 version=400
//       held-out frame accuracy: 61.2%
// and progress (adpsgd adds the last model distance to a peer):
//   worker 0 step 200 epoch 0.41 loss 1.873 batch-acc 44.5% frames/s 5120
//       consensus-distance 0.31
//
// Thread-safety: one DecentralizedTrainer per thread. Run() uses the
// PeerClient from two threads with delay_by_one.
#ifndef ASGD_WORKER_DECENTRALIZED_TRAINER_H_
#define ASGD_WORKER_DECENTRALIZED_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/adpsgd.h"
#include "worker/allreduce.h"
#include "worker/dnn.h"
#include "worker/frames.h"
#include "worker/peer_client.h"
#include "worker/peer_model.h"
#include "worker/peer_observer.h"
#include "worker/trainer.h"

namespace asgd {

enum class DecentralizedMode { kAdpsgd, kAllreduce };

// True for "adpsgd" and "allreduce".
bool IsDecentralizedMode(absl::string_view text);
absl::StatusOr<DecentralizedMode> ParseDecentralizedMode(
    absl::string_view text);
std::string DecentralizedModeName(DecentralizedMode mode);

struct DecentralizedOptions {
  DecentralizedMode mode = DecentralizedMode::kAdpsgd;
  float learning_rate = 0.05f;  // of the local SGD step
  bool delay_by_one = false;    // kAdpsgd only
  AdpsgdOptions adpsgd;
  // kAllreduce: longest wait for a neighbour's message.
  absl::Duration allreduce_timeout = absl::Seconds(60);
  PeerObserver* peer_observer = nullptr;  // may be null; outlives Run()
};

struct DecentralizedResult {
  // steps, frames, seconds, last_loss, phases (push: blocked on peers),
  // evals, and params: the local model at the end. pushes stays 0.
  TrainResult train;
  AverageStats averages;   // kAdpsgd: the exchanges this worker started
  int64_t allreduces = 0;  // kAllreduce
};

class DecentralizedTrainer {
 public:
  // Uses from `options`: worker_index, batch_size, max_steps, epochs,
  // slowdown, log_every, eval_every, eval_every_s, eval_frames, seed and
  // observer; use_pool and warm_start_epochs must be off. `mailbox` is
  // needed for kAllreduce only; `heldout` may be null. All pointers must
  // outlive the trainer.
  DecentralizedTrainer(PeerModel* model, PeerClient* peers,
                       AllreduceMailbox* mailbox, DnnBackend* backend,
                       const FrameData* train, const FrameData* heldout,
                       const TrainerOptions& options,
                       const DecentralizedOptions& decentralized,
                       std::ostream* log);

  absl::StatusOr<DecentralizedResult> Run();

 private:
  absl::Status Validate() const;
  absl::Status MaybeEvaluate(DecentralizedResult* result, bool force);
  void LogProgress(const DecentralizedResult& result, double epochs,
                   bool force);

  PeerModel* const model_;
  PeerClient* const peers_;
  AllreduceMailbox* const mailbox_;
  DnnBackend* const backend_;
  const FrameData* const train_;
  const FrameData* const heldout_;
  const TrainerOptions options_;
  const DecentralizedOptions decentralized_;
  std::ostream* const log_;

  absl::Time start_, last_eval_, window_start_;
  int64_t window_frames_ = 0, window_correct_ = 0;
  double window_loss_ = 0;
  double consensus_distance_ = -1;
};

}  // namespace asgd

#endif  // ASGD_WORKER_DECENTRALIZED_TRAINER_H_
