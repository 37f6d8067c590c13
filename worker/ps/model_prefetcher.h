// ModelPrefetcher: pulls the next model while the worker computes (double
// buffering), so that a worker whose compute takes longer than a pull never
// waits for one.
//
// The worker computes on its front buffer (the model it holds, with the
// versions it was pulled at); the prefetcher owns a back buffer of the same
// size and a thread that pulls into it. Request() asks for a model newer
// than any pull started so far (the worker calls it when a push completed):
// a pull starts at once if none is in flight, else right after the one in
// flight, so at most one pull is in flight and a push that completed during
// a pull is still followed by a pull that starts after it. TakeIfReady()
// never waits: when a pulled model has landed it swaps the two buffers (no
// copy), so the model and its versions change together, between two
// minibatches, and the versions a gradient is reported with are always those
// of the model it was computed from.
//
//   ModelPrefetcher prefetcher(client, params.size());
//   ... a push completed:  prefetcher.Request();
//   ... before each minibatch:
//   ASGD_ASSIGN_OR_RETURN(bool fresh, prefetcher.TakeIfReady(&params, &versions));
//
// A failed pull is reported once by the next TakeIfReady() or Wait() (the
// caller pulls itself, with its retries); the prefetcher does not retry.
//
// Thread-safety: Request() may be called from any thread; TakeIfReady() and
// Wait() from one thread (the worker's). The client must allow a Pull
// concurrently with the caller's other calls (ParamClient does, one Pull at
// a time: the caller must not pull itself while pull_in_flight()). The
// destructor waits for a pull in flight.
#ifndef ASGD_WORKER_PS_MODEL_PREFETCHER_H_
#define ASGD_WORKER_PS_MODEL_PREFETCHER_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/ps/param_client.h"

namespace asgd {

class ModelPrefetcher {
 public:
  // How a pull into a buffer is made (once, no retries); empty:
  // client->Pull(buffer, versions).
  using PullInto = std::function<absl::Status(absl::Span<float> buffer,
                                              std::vector<uint64_t>* versions)>;

  // `client` must outlive the prefetcher; `size` is the model's size.
  ModelPrefetcher(ParamClient* client, int64_t size, PullInto pull = nullptr);
  ~ModelPrefetcher();

  ModelPrefetcher(const ModelPrefetcher&) = delete;
  ModelPrefetcher& operator=(const ModelPrefetcher&) = delete;

  // Asks for a model newer than every pull started so far.
  void Request();

  // If a pull has landed since the last take: swaps its model into
  // *params and its versions into *versions (params must hold `size`
  // floats) and returns true; its error if it failed. False when nothing
  // has landed. Never waits.
  absl::StatusOr<bool> TakeIfReady(std::vector<float>* params,
                                   std::vector<uint64_t>* versions);

  // Waits until no pull is in flight or requested, then as TakeIfReady().
  absl::StatusOr<bool> Wait(std::vector<float>* params,
                            std::vector<uint64_t>* versions);

  // The memory of the buffer the prefetcher brought (taken models alternate
  // between it and the caller's own): valid until the prefetcher is gone,
  // whichever of the two holds it. For a caller that pins both
  // (ModelBackend::PinHostBuffer).
  absl::Span<const float> second_buffer() const { return second_buffer_; }

  // Pulls started so far.
  int64_t pulls() const;
  // True while a pull is in flight or requested and not yet started.
  bool pull_in_flight() const;

 private:
  void Run();
  absl::StatusOr<bool> TakeLocked(std::vector<float>* params,
                                  std::vector<uint64_t>* versions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ParamClient* const client_;
  const PullInto pull_;  // may be empty
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool landed_ ABSL_GUARDED_BY(mu_) = false;  // back_ holds an untaken pull
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // of the landed pull
  int64_t pulls_ ABSL_GUARDED_BY(mu_) = 0;
  // Written by the thread only while in_flight_, read under mu_ otherwise.
  std::vector<float> back_;
  const absl::Span<const float> second_buffer_;  // back_'s block at the start
  std::vector<uint64_t> back_versions_;
  std::thread thread_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_MODEL_PREFETCHER_H_
