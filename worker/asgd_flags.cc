#include "worker/asgd_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "common/pool_run_id.h"

ABSL_FLAG(int, push_every, 1,
          "Accumulate this many minibatch gradients per push (their average; "
          "the server scales its step, see asgd_server --minibatch_lr_scale).");
ABSL_FLAG(bool, compute_while_pushing, true,
          "SPEECH3 rule: while the previous push is on the wire, compute "
          "another minibatch instead of waiting (asgd mode).");
ABSL_FLAG(int, max_minibatches_per_push, 4,
          "With --compute_while_pushing: at most this many minibatches go into "
          "one push; then the worker waits for the previous push.");
ABSL_FLAG(uint64_t, pool_seed, 1,
          "Example order of the pool's epochs; the same on every worker.");
ABSL_FLAG(double, warm_start_epochs, 0,
          "Worker 0 trains this many epochs of plain SGD locally and hands "
          "the model to the servers before ASGD starts; the others wait.");
ABSL_FLAG(bool, overlap_pulls, true,
          "asgd mode: pull the next model in the background while minibatches "
          "compute (double buffering); the worker waits for a pull only when "
          "it got --max_overlapped_steps minibatches ahead of it.");
ABSL_FLAG(int, max_overlapped_steps, 1,
          "With --overlap_pulls: the most minibatches computed on one model "
          "while the next one is on the wire.");

ABSL_FLAG(int, prefetch_batches, 2,
          "This worker's own minibatches (not the shared pool's) are "
          "prepared this many ahead on a thread of their own, while the "
          "current one computes; the same minibatches in the same order. A "
          "CUDA backend also gets each one a step ahead and uploads it while "
          "the one before computes. 0: each when it is needed (nothing "
          "uploaded ahead). At most 16.");
ABSL_FLAG(std::string, pool_run_id_file, "",
          "With --minibatch_pool (required there): a file holding this run's "
          "id, 16 to 256 bytes (surrounding whitespace ignored), the same for "
          "every worker of the run and secret to everyone else: the pool "
          "keeps one dataset per run id, so no other client can take or use "
          "up the run's batches. New for each run, e.g. `head -c 16 "
          "/dev/urandom | od -An -tx1 | tr -d ' \\n'`.");

namespace asgd {

void AsgdTrainerFlags(TrainerOptions* options) {
  const bool asgd = options->mode == TrainMode::kAsgd;
  options->push_every = absl::GetFlag(FLAGS_push_every);
  options->compute_while_pushing =
      asgd && absl::GetFlag(FLAGS_compute_while_pushing);
  options->max_minibatches_per_push =
      absl::GetFlag(FLAGS_max_minibatches_per_push);
  options->overlap_pulls = asgd && absl::GetFlag(FLAGS_overlap_pulls);
  options->max_overlapped_steps = absl::GetFlag(FLAGS_max_overlapped_steps);
  options->pool_seed = absl::GetFlag(FLAGS_pool_seed);
  options->warm_start_epochs = absl::GetFlag(FLAGS_warm_start_epochs);
  options->prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
}

absl::StatusOr<std::string> PoolRunIdFromFlags() {
  const std::string path = absl::GetFlag(FLAGS_pool_run_id_file);
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "--minibatch_pool needs --pool_run_id_file: a file with a secret "
        "shared by this run's workers (e.g. `umask 077; head -c 16 "
        "/dev/urandom | od -An -tx1 | tr -d ' \\n' > run_id`)");
  }
  return ReadPoolRunIdFile(path, "--pool_run_id_file");
}

}  // namespace asgd
