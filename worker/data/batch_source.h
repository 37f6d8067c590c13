// BatchSource: where a training loop's minibatches come from. LocalSource
// draws them from this worker's own examples in a seeded random order, for
// a number of epochs; other sources (the parameter servers' shared
// minibatch pool, worker/ps/pool_source.h; data streamed from disk,
// worker/data/stream_source.h) implement the same interface.
//
// Thread-safety: a source is used by one thread.
#ifndef ASGD_WORKER_DATA_BATCH_SOURCE_H_
#define ASGD_WORKER_DATA_BATCH_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/data/examples.h"

namespace asgd {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills `batch` (batch->sequences examples); false when the data is used
  // up.
  virtual absl::StatusOr<bool> Next(BatchBuffer* batch) = 0;
  // Passes over the data so far.
  virtual double epochs() const = 0;
};

class LocalSource final : public BatchSource {
 public:
  // `epochs` passes (0: no limit). `data` must outlive the source.
  LocalSource(const ExampleSet* data, uint64_t seed, double epochs)
      : sampler_(data, seed), epochs_(epochs) {}

  absl::StatusOr<bool> Next(BatchBuffer* batch) override {
    if (epochs_ > 0 && sampler_.epochs() >= epochs_) return false;
    sampler_.Next(batch);
    return true;
  }
  double epochs() const override { return sampler_.epochs(); }

 private:
  ExampleSampler sampler_;
  const double epochs_;
};

// Opens a fresh source over a worker's training data: minibatches in an
// order drawn from `seed`, for `epochs` passes (0: no limit). Training loops
// take one to train from data they do not hold in memory (StreamSource).
using OpenBatchSource =
    std::function<absl::StatusOr<std::unique_ptr<BatchSource>>(uint64_t seed,
                                                               double epochs)>;

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_BATCH_SOURCE_H_
