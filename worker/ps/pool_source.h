// PoolSource: minibatches from the shared minibatch pool on server 0
// (ParamClient::FetchBatches, through a PoolFetch that adds the run id and,
// in the Trainer, retries). Every worker holds all examples and maps a
// batch id b to examples through EpochOrder: batch b mod batches_per_epoch
// of epoch b / batches_per_epoch, so that a slow worker simply takes fewer
// batches and every batch of every epoch is used once.
//
// Thread-safety: used by one thread.
#ifndef ASGD_WORKER_PS_POOL_SOURCE_H_
#define ASGD_WORKER_PS_POOL_SOURCE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/batch_source.h"
#include "worker/data/examples.h"
#include "worker/ps/param_client.h"

namespace asgd {

// Up to `count` batch ids of this run's dataset of `num_frames` examples in
// batches of `batch_size` for `epochs` passes; an error ends the source.
using PoolFetch = std::function<absl::StatusOr<PoolGrant>(
    uint64_t num_frames, int batch_size, double epochs, int count)>;

class PoolSource final : public BatchSource {
 public:
  // Minibatches of `examples_per_batch` examples of `data`, for `epochs`
  // passes, their ids from `fetch`. `data` must outlive the source.
  PoolSource(PoolFetch fetch, const ExampleSet* data, uint64_t seed,
             int examples_per_batch, double epochs);

  absl::StatusOr<bool> Next(BatchBuffer* batch) override;
  double epochs() const override;

 private:
  const PoolFetch fetch_;
  const ExampleSet* const data_;
  const uint64_t seed_;
  const int batch_size_;
  const double epochs_;
  std::vector<uint64_t> queue_;  // next id at the back
  uint64_t per_epoch_ = 1;
  bool exhausted_ = false;
  std::optional<uint64_t> order_epoch_;
  std::vector<int64_t> order_;
  std::vector<int64_t> ids_;
  int64_t taken_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_POOL_SOURCE_H_
