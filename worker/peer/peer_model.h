// PeerModel: a worker's own copy of the model in the decentralized modes,
// shared between its training thread and its peer service (which averages it
// with other workers' models while the worker computes).
//
// Pairwise averaging (AD-PSGD): worker i (the initiator) sends a copy s of
// its model to worker j (the responder). The responder, under its lock, sets
// x_j = (s + x_j) / 2 and answers with x_j as it was (AverageAsResponder).
// The initiator then, under its lock, sets x_i = (s + x_j) / 2 + (x_i - s)
// (AverageAsInitiator): it keeps whatever changed its model while the
// exchange was on the wire (a gradient step, an exchange it answered) instead
// of overwriting it. So
//  * when nothing changed x_i meanwhile, both end bitwise equal to the
//    average (the float sum is commutative, and the kept difference is
//    exactly zero);
//  * every completed exchange preserves the sum of the two models, whatever
//    ran concurrently, so no lock is ever held across the network and two
//    workers that pick each other at the same time cannot deadlock.
//
// Thread-safety: thread-safe; every method is atomic with respect to the
// others. Span sizes must equal size() (an internal invariant: callers
// validate data from the network first).
#ifndef ASGD_WORKER_PEER_PEER_MODEL_H_
#define ASGD_WORKER_PEER_PEER_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace asgd {

class PeerModel {
 public:
  explicit PeerModel(std::vector<float> initial);

  int64_t size() const { return size_; }

  // Copies the model into `out`.
  void Read(absl::Span<float> out) const;
  // Replaces the model.
  void Assign(absl::Span<const float> values);
  // x -= lr * scale * g, element by element as lr * (scale * g[i]).
  void ApplyGradient(absl::Span<const float> g, float lr, float scale = 1.0f);

  // Responder side: writes the model as it is to `before`, then sets it to
  // (theirs + before) / 2. Returns the L2 distance between the two models.
  double AverageAsResponder(absl::Span<const float> theirs,
                            absl::Span<float> before);
  // Initiator side, after the responder answered `theirs` to the copy `sent`
  // of this model: x = (sent + theirs) / 2 + (x - sent).
  void AverageAsInitiator(absl::Span<const float> sent,
                          absl::Span<const float> theirs);

 private:
  const int64_t size_;
  mutable absl::Mutex mu_;
  std::vector<float> x_ ABSL_GUARDED_BY(mu_);
};

// L2 norm of a - b (same sizes), accumulated in double.
double L2Distance(absl::Span<const float> a, absl::Span<const float> b);

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_PEER_MODEL_H_
