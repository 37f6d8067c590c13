// ConsensusTrainer: a worker's training loop in the consensus modes
// (asgd_worker --mode=easgd, --mode=admm). Each worker trains its own copy x
// of the model on its part of the data with local SGD; every `every` (tau)
// minibatches it communicates with the parameter servers, which hold the
// consensus model z. The rules are in consensus_rules.h:
//
//   easgd: pull z; e = alpha (x - z); push e (an ADD push: the servers add
//          it to z); x -= e on the slices of the servers that applied it.
//   admm:  local steps on the augmented Lagrangian (g + lam + rho (x - z));
//          push this worker's share of the consensus average, (u - u_sent)/N
//          with u = x + lam / rho (an ADD push; u_sent follows on the slices
//          of the servers that applied it, so a share that was dropped or
//          lost goes with the next one); pull z; lam += rho (x - z).
//
// The push goes as --wire_dtype: with bf16 the servers add e (or the share)
// rounded to bfloat16 while the worker keeps its float32 value, so the two
// ends of EASGD's spring move by amounts that differ in the low bits.
//
// The servers keep nothing per worker: ADMM's duals and last shares live
// here, on the worker that owns them (3 model-sized buffers besides x, z
// and the gradient). The consensus starts as the pool's model, which every
// worker pulls first (x = z, lam = 0, u_sent = z: z is then the average of
// every worker's u). A worker that dies leaves its last share in the
// average; the others go on. One restarted in its place starts again with
// u_sent = z, so for ADMM its predecessor's last share stays in z as an
// offset, (u_sent_dead - z) / N (nothing on the servers remembers it).
//
// Staleness and drops are the servers' as for ASGD: an ADD push staler than
// --max_staleness is dropped (the worker's half is then not applied
// either); refused (overloaded) pushes likewise; a server that is away is
// waited out by the one RetryPolicy (worker/ps/retry_policy.h) as in the
// ASGD trainer. A push the servers refuse as malformed (InvalidArgument,
// FailedPrecondition: a synchronous pool, an old server) ends the run.
//
// The loop ends after max_steps, max_seconds or the worker's epochs, then
// communicates once more (so the consensus holds its last steps) and pulls
// the final consensus. Held-out evaluations score the consensus as last
// pulled (version: server 0's); progress lines add
//   " max-staleness 3 consensus-distance 0.31"
// (the largest staleness the servers reported since the last line, and
// |x - z| at the last communication). Reported by the
// shared scaffold (worker/loop/loop.h): TrainerObserver::OnStep, OnPush
// per communication; and ConsensusObserver::OnRound.
//
// A minibatch whose loss or gradient is NaN or Inf stops the run before it
// reaches x (CheckStepFinite).
//
// Thread-safety: one ConsensusTrainer per thread; Run() once.
#ifndef ASGD_WORKER_CONSENSUS_CONSENSUS_TRAINER_H_
#define ASGD_WORKER_CONSENSUS_CONSENSUS_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/backend.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/loop/loop.h"
#include "worker/ps/param_client.h"
#include "worker/ps/retry_policy.h"

namespace asgd {

enum class ConsensusRule { kEasgd, kAdmm };

// Monitoring hook of the consensus modes (ConsensusMetrics exports it),
// called on the training thread after each communication: how many of the
// pool's servers applied their part of the push, and |x - z|.
class ConsensusObserver {
 public:
  virtual ~ConsensusObserver() = default;
  virtual void OnRound(int servers_applied, int servers, double distance) = 0;
};

// True for "easgd" and "admm".
bool IsConsensusMode(absl::string_view text);
absl::StatusOr<ConsensusRule> ParseConsensusMode(absl::string_view text);
std::string ConsensusModeName(ConsensusRule rule);

struct ConsensusOptions {
  LoopOptions loop;
  ConsensusRule rule = ConsensusRule::kEasgd;
  float learning_rate = 0.05f;  // of the local SGD step (> 0)
  int every = 4;                // tau: minibatches between communications
  float alpha = 0.5f;           // easgd: elastic coefficient, in (0, 1]
  float rho = 0.1f;             // admm: penalty, > 0
  int num_workers = 1;          // admm: the workers the average is over
  RetryOptions retry;
  ConsensusObserver* observer = nullptr;  // may be null; outlives Run()
  // When set, minibatches come from the source it opens instead of a
  // LocalSource over `train` (which then only gives the examples' shape).
  OpenBatchSource open_source;
};

// InvalidArgument naming the first bad value: learning_rate <= 0, every < 1,
// alpha outside (0, 1], rho <= 0, num_workers < 1, or what
// ValidateLoopOptions refuses.
absl::Status ValidateConsensusOptions(const ConsensusOptions& options);

struct ConsensusResult {
  // steps, pushes (communications whose push went out), frames, seconds,
  // phases (pull, push: communication), evals, and params: the consensus
  // pulled at the end.
  TrainResult train;
  std::vector<float> local;   // this worker's own model x at the end
  int64_t rounds = 0;         // communications
  int64_t parts_dropped = 0;  // server parts not applied (stale, refused)
  double last_distance = -1;  // |x - z| at the last communication
};

class ConsensusTrainer {
 public:
  // `heldout` may be null. The backend's max_rows() must hold a minibatch
  // of `train`. All pointers must outlive the trainer.
  ConsensusTrainer(ParamClient* client, ModelBackend* backend,
                   const ExampleSet* train, const ExampleSet* heldout,
                   const ConsensusOptions& options, std::ostream* log);

  absl::StatusOr<ConsensusResult> Run();

 private:
  struct State;
  absl::Status PullWithRetry(State* s);
  // One communication (the rule's push and pull); books it in `result`.
  absl::Status Communicate(State* s, ConsensusResult* result);
  // Sends `values` as an ADD push computed from s->versions; marks in
  // s->applied which servers applied their part.
  absl::Status PushAdd(State* s, ConsensusResult* result);
  // The progress line's note; starts the next staleness window.
  std::string ProgressExtra(const ConsensusResult& result);

  ParamClient* const client_;
  ModelBackend* const backend_;
  const ExampleSet* const train_;
  const ConsensusOptions options_;
  LoopReporter reporter_;  // holds the held-out set and the log
  RetryPolicy retry_;
  uint64_t window_staleness_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_CONSENSUS_CONSENSUS_TRAINER_H_
