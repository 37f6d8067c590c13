// The trainer's minibatches (trainer.h): its own data, drawn ahead on a
// thread of its own (prefetch_batches) and, for a backend that stages them,
// handed to it one ahead (LookAheadSource), or the servers' shared pool.
#include "worker/ps/trainer.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/data/look_ahead_source.h"
#include "worker/data/make_examples.h"
#include "worker/data/prefetch_source.h"
#include "worker/ps/pool_source.h"

namespace asgd {

absl::StatusOr<std::unique_ptr<BatchSource>> Trainer::OpenSource(
    uint64_t seed, double epochs) const {
  std::unique_ptr<BatchSource> source;
  if (options_.open_source) {
    ASGD_ASSIGN_OR_RETURN(source, options_.open_source(seed, epochs));
  } else {
    source = std::make_unique<LocalSource>(train_, seed, epochs);
  }
  if (options_.prefetch_batches <= 0) return source;
  const BatchShape shape = ShapeOfBatch(*train_, options_.loop.batch_size);
  const BatchBuffer prototype(shape.examples, shape.steps, train_->input_dim(),
                              train_->labels_per_row());
  source = std::make_unique<PrefetchSource>(
      std::move(source), options_.prefetch_batches, prototype);
  // The next minibatch goes to the device while this one computes.
  return StageAhead(std::move(source), backend_, prototype);
}

absl::StatusOr<PoolGrant> Trainer::FetchWithRetry(uint64_t num_frames,
                                                  int batch_size,
                                                  double epochs, int count) {
  for (;;) {
    absl::StatusOr<PoolGrant> grant = client_->FetchBatches(
        options_.pool_run_id, num_frames, batch_size, epochs, count);
    if (grant.ok()) {
      retry_.Succeeded(absl::StrCat("the minibatch pool answered after ",
                                    retry_.failures(), " retries"));
      return grant;
    }
    const absl::Status& error = grant.status();
    if (error.code() == absl::StatusCode::kResourceExhausted &&
        retry_.failures() == 0 && log_ != nullptr) {
      *log_ << "worker " << options_.loop.worker_index
            << ": the minibatch pool on server 0 has no room for this run's "
               "dataset now (other datasets are in use, or this address "
               "already uses its share); asking again for up to "
            << absl::FormatDuration(retry_.max_retry_time())
            << ": a dataset unused for a while is forgotten" << std::endl;
    }
    ASGD_RETURN_IF_ERROR(
        retry_.BackOff(error, "minibatch pool fetch", /*pool_full=*/true));
  }
}

absl::StatusOr<std::unique_ptr<BatchSource>> Trainer::OpenTrainingSource() {
  const LoopOptions& loop = options_.loop;
  if (!options_.use_pool) {
    return OpenSource(loop.seed * 7919 + loop.worker_index, loop.epochs);
  }
  return std::unique_ptr<BatchSource>(std::make_unique<PoolSource>(
      [this](uint64_t num_frames, int batch_size, double epochs, int count) {
        return FetchWithRetry(num_frames, batch_size, epochs, count);
      },
      train_, options_.pool_seed,
      ShapeOfBatch(*train_, loop.batch_size).examples, loop.epochs));
}

}  // namespace asgd
