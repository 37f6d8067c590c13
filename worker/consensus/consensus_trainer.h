// ConsensusTrainer: a worker's training loop in the consensus modes
// (asgd_worker --mode=easgd, --mode=admm). Each worker trains its own copy x
// of the model on its part of the data with local SGD; every `every` (tau)
// minibatches it communicates with the parameter servers, which hold the
// consensus model z. The rules are in consensus_rules.h:
//
//   easgd: pull z; e = alpha (x - z); push e (an ADD push: the servers add
//          it to z); x -= e on the slices of the servers that applied it.
//   admm:  local steps on the augmented Lagrangian (g + lam + rho (x - z));
//          push this worker's point u = x + lam / rho (an ADMM push for its
//          slot, --worker_index: the servers replace the slot's last point
//          with it in their average, so a push that was dropped or lost is
//          made good by the next one); pull z; lam += rho (x - z).
//
// The push goes as --wire_dtype: with bf16 the servers take e (or the
// point) rounded to bfloat16 while the worker keeps its float32 value, so the two
// ends of EASGD's spring move by amounts that differ in the low bits.
//
// ADMM needs servers started with --admm_slots=N (N workers, slots 0..N-1):
// they keep each slot's last point, and z is the points' average. Every
// slot starts as the pool's model. A worker starts by pulling z and its
// slot's point u_slot, and takes x = z, lam = rho (u_slot - z), the dual
// that gives the slot's point, so z does not move when it joins: on a pool
// nobody trained yet that is lam = 0; for a worker restarted in a dead
// one's place (as Kubernetes restarts a pod) the dead worker's place in the
// average passes on to it (its local model is lost; its point is not); a
// worker that starts after the others moved z keeps its slot's initial
// point in the average the same way. Logged as
//   "worker 1 admm slot 1: |u_slot - z| 2.074 (dual rho (u_slot - z): ...)".
// Buffers: x, z, the gradient, lam and the point pushed. EASGD keeps
// nothing per worker on the servers: a worker that dies leaves its last
// elastic step in z; the others go on.
//
// Staleness and drops are the servers' as for ASGD: an ADD or ADMM push
// staler than --max_staleness is dropped (EASGD's half on the worker is
// then not applied either); refused (overloaded) pushes likewise; a server
// that is away is waited out by the one RetryPolicy
// (worker/ps/retry_policy.h) as in the ASGD trainer. A push the servers
// refuse as malformed (InvalidArgument, FailedPrecondition: a synchronous
// pool, a pool without ADMM slots or EASGD on one with them, an old
// server) ends the run, as does a slot pull they refuse.
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
  float rho = 0.1f;             // admm: penalty, > 0; the servers' slot is
                                // loop.worker_index
  RetryOptions retry;
  ConsensusObserver* observer = nullptr;  // may be null; outlives Run()
  // When set, minibatches come from the source it opens instead of a
  // LocalSource over `train` (which then only gives the examples' shape).
  OpenBatchSource open_source;
};

// InvalidArgument naming the first bad value: learning_rate <= 0, every < 1,
// alpha outside (0, 1], rho <= 0, or what ValidateLoopOptions refuses.
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
  // admm: |u_slot - z| when the worker took its slot (0 on a pool nobody
  // trained yet).
  double slot_distance = -1;
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
  // admm: x = z, lam from the slot's point (see above); logs it.
  absl::Status TakeSlot(State* s, ConsensusResult* result);
  // One communication (the rule's push and pull); books it in `result`.
  absl::Status Communicate(State* s, ConsensusResult* result);
  // Sends `values` as an ADD push (admm: an ADMM push for the worker's
  // slot) computed from s->versions; marks in s->applied which servers
  // applied their part.
  absl::Status PushAdd(State* s, ConsensusResult* result);
  // The progress line's note; starts the next staleness window.
  std::string ProgressExtra(const ConsensusResult& result);

  ParamClient* const client_;
  ModelBackend* const backend_;
  const ExampleSet* const train_;
  const ConsensusOptions options_;
  std::ostream* const log_;  // may be null
  LoopReporter reporter_;  // holds the held-out set and the log
  RetryPolicy retry_;
  uint64_t window_staleness_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_CONSENSUS_CONSENSUS_TRAINER_H_
