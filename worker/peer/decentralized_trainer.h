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
// up, whichever comes first. Any model kind: examples from worker/data,
// math from a ModelBackend. Reported by the shared scaffold
// (worker/loop/loop.h) like the parameter-server trainer:
// TrainerObserver::OnStep per step (push_seconds: time blocked on peers),
// held-out evaluations whose version is the step count, and progress lines
// to which adpsgd adds the last model distance to a peer
// (" consensus-distance 0.31").
//
// A minibatch whose loss or gradient is NaN or Inf stops the run before its
// gradient is applied or sent to a peer (CheckStepFinite, IsNonFiniteStep).
//
// Thread-safety: one DecentralizedTrainer per thread. Run() uses the
// PeerClient from two threads with delay_by_one.
#ifndef ASGD_WORKER_PEER_DECENTRALIZED_TRAINER_H_
#define ASGD_WORKER_PEER_DECENTRALIZED_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "model/backend.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/loop/loop.h"
#include "worker/peer/adpsgd.h"
#include "worker/peer/allreduce.h"
#include "worker/peer/peer_client.h"
#include "worker/peer/peer_model.h"
#include "worker/peer/peer_observer.h"

namespace asgd {

enum class DecentralizedMode { kAdpsgd, kAllreduce };

// True for "adpsgd" and "allreduce".
bool IsDecentralizedMode(absl::string_view text);
absl::StatusOr<DecentralizedMode> ParseDecentralizedMode(
    absl::string_view text);
std::string DecentralizedModeName(DecentralizedMode mode);

struct DecentralizedOptions {
  LoopOptions loop;
  DecentralizedMode mode = DecentralizedMode::kAdpsgd;
  float learning_rate = 0.05f;  // of the local SGD step (> 0)
  bool delay_by_one = false;    // kAdpsgd only
  AdpsgdOptions adpsgd;
  // kAllreduce: longest wait for a neighbour's message.
  absl::Duration allreduce_timeout = absl::Seconds(60);
  PeerObserver* peer_observer = nullptr;  // may be null; outlives Run()
  // When set, minibatches come from the source it opens (e.g. a
  // StreamSource over a Kaldi data directory) instead of a LocalSource over
  // `train`, which then only gives the examples' shape and may be empty.
  OpenBatchSource open_source;
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
  // `mailbox` is needed for kAllreduce only; `heldout` may be null. The
  // backend's max_rows() must hold a minibatch of `train`. All pointers
  // must outlive the trainer.
  DecentralizedTrainer(PeerModel* model, PeerClient* peers,
                       AllreduceMailbox* mailbox, ModelBackend* backend,
                       const ExampleSet* train, const ExampleSet* heldout,
                       const DecentralizedOptions& options, std::ostream* log);

  absl::StatusOr<DecentralizedResult> Run();

 private:
  absl::Status Validate() const;
  // The local model, evaluated (result->train.params gets a copy).
  absl::Status Evaluate(DecentralizedResult* result, bool full);
  std::string ProgressExtra() const;

  PeerModel* const model_;
  PeerClient* const peers_;
  AllreduceMailbox* const mailbox_;
  ModelBackend* const backend_;
  const ExampleSet* const train_;
  const ExampleSet* const heldout_;
  const DecentralizedOptions options_;
  std::ostream* const log_;
  LoopReporter reporter_;
  double consensus_distance_ = -1;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_DECENTRALIZED_TRAINER_H_
