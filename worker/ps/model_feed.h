// ModelFeed: which model the worker's next minibatch is computed on.
//
// After every push that completed (applied, dropped, refused or lost) the
// worker needs a newer model. Without overlap it pulls now, before the next
// minibatch (through the caller's pull function, which retries). With
// overlap (a ModelPrefetcher), the next model is pulled in the background,
// asked for by PushCompleted() from the thread that pushed, and Refresh()
// takes it between two minibatches once it has landed; it waits for it only
// when
//  * the last push was dropped as too stale (the next gradient needs a
//    model pulled after the drop: a model that landed before it is taken,
//    then the one asked for after it is waited for), or
//  * max_overlapped_steps minibatches were computed on the model held while
//    the next was on the wire.
// A failed background pull takes the one retry path (RetryPolicy), then is
// asked for again and waited for.
//
//   ModelFeed feed(options, client, &retry, pull_fn);
//   ... a push completed (pushing thread):  feed.PushCompleted();
//   ... its outcome booked:                 feed.PushSettled(stale);
//                                  (or, failed or refused, feed.PushLost())
//   ... before each minibatch:              feed.Refresh(&params, &versions);
//   ... after each minibatch:               feed.Computed();
//
// Thread-safety: PushCompleted() may be called from any thread while the
// feed prefetches; every other method from the worker's thread.
#ifndef ASGD_WORKER_PS_MODEL_FEED_H_
#define ASGD_WORKER_PS_MODEL_FEED_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/ps/model_prefetcher.h"
#include "worker/ps/param_client.h"
#include "worker/ps/retry_policy.h"

namespace asgd {

struct ModelFeedOptions {
  int64_t size = 0;            // floats in the model
  bool overlap_pulls = false;  // prefetch in the background
  int max_overlapped_steps = 1;
  // How the prefetcher pulls into its buffer (ModelPrefetcher::PullInto;
  // empty: the client's Pull).
  ModelPrefetcher::PullInto prefetch_pull;
};

class ModelFeed {
 public:
  // Pulls the model now, with retries.
  using PullFn = std::function<absl::Status(std::vector<float>* params,
                                            std::vector<uint64_t>* versions)>;

  // `client` (for the background pulls; may be null without overlap_pulls)
  // and `retry` must outlive the feed.
  ModelFeed(const ModelFeedOptions& options, ParamClient* client,
            RetryPolicy* retry, PullFn pull);

  // A push finished on the wire (called by the pushing thread): with
  // overlap, the next model is asked for now.
  void PushCompleted();
  // A push was answered: the next minibatch needs a newer model;
  // `stale_drop`: one pulled after the push (a server dropped it as too
  // stale).
  void PushSettled(bool stale_drop);
  // A push failed or was refused: the next minibatch needs a newer model
  // (what a settled push asked for stands).
  void PushLost() { need_pull_ = true; }
  // Before a minibatch: brings *params and *versions up to date as above.
  absl::Status Refresh(std::vector<float>* params,
                       std::vector<uint64_t>* versions);
  // The prefetcher's buffer (see ModelPrefetcher::second_buffer), empty
  // without overlap; valid until StopPrefetching() or the feed's end.
  absl::Span<const float> second_buffer() const {
    return prefetcher_ != nullptr ? prefetcher_->second_buffer()
                                  : absl::Span<const float>();
  }
  // Models Refresh has put into *params so far (a caller that keeps its
  // own copy of the model, on a device, reloads it when this changes).
  int64_t models() const { return models_; }
  // After a minibatch was computed on the model held.
  void Computed() { ++steps_on_model_; }
  // Stops the background pulls (waiting for one in flight); from then on
  // models are pulled now. Not while a push may call PushCompleted().
  void StopPrefetching() { prefetcher_.reset(); }

 private:
  // Takes the prefetched model if one landed (with `wait`: waits for the
  // pull in flight or requested); true when it took one.
  absl::StatusOr<bool> Take(bool wait, std::vector<float>* params,
                            std::vector<uint64_t>* versions);

  const ModelFeedOptions options_;
  RetryPolicy* const retry_;
  const PullFn pull_;
  std::unique_ptr<ModelPrefetcher> prefetcher_;
  bool need_pull_ = false;   // the model was just pulled
  bool stale_drop_ = false;  // the last push was dropped as too stale
  int steps_on_model_ = 0;   // minibatches computed on the model held now
  int64_t models_ = 0;       // models put into *params by Refresh
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_MODEL_FEED_H_
