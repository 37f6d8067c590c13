// PeerClient: how a worker talks to the other workers in the decentralized
// modes, as a small interface so the training loop and tests do not depend
// on gRPC (GrpcPeerClient in peer_grpc_client.h is the real one).
//
// Workers are named by their index in [0, num_workers). Models and
// gradients are flat float vectors in ModelLayout order.
//
// Thread-safety: implementations are thread-safe (the delay-by-one loop
// averages on a second thread while the training thread computes).
#ifndef ASGD_WORKER_PEER_PEER_CLIENT_H_
#define ASGD_WORKER_PEER_PEER_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model_layout.h"

namespace asgd {

class PeerClient {
 public:
  virtual ~PeerClient() = default;

  virtual int worker_index() const = 0;
  virtual int num_workers() const = 0;

  // Pairwise averaging with `peer` (see peer_model.h): sends `mine`, a copy
  // of this worker's whole model, and receives into `theirs` the peer's model
  // as it was just before the peer averaged `mine` into it. Fails with the
  // call's status (UNAVAILABLE for a peer that is gone, DEADLINE_EXCEEDED
  // for one that does not answer in time); on failure `theirs` is garbage
  // and the peer may or may not have averaged.
  virtual absl::Status Average(int peer, uint64_t step,
                               absl::Span<const float> mine,
                               absl::Span<float> theirs) = 0;

  // Delivers message (iteration, round) of a ring allreduce, `values` for the
  // flat range `range`, to `peer`'s mailbox (allreduce.h). Returns once the
  // peer has stored it.
  virtual absl::Status SendSegment(int peer, uint64_t iteration, int round,
                                   FlatRange range,
                                   absl::Span<const float> values) = 0;

  // Waits until every other worker has finished training, at most `timeout`
  // in all. A worker that cannot be reached (or answers with an error)
  // counts as finished: it averages no more. Returns the workers that did
  // not answer by the deadline (still training, or hung).
  virtual std::vector<int> AwaitPeersDone(absl::Duration timeout) = 0;
};

// The peer client of a worker that trains alone: there is nobody to average
// or exchange with (Average and SendSegment are Internal errors), and nobody
// to wait for.
class NoPeers final : public PeerClient {
 public:
  int worker_index() const override { return 0; }
  int num_workers() const override { return 1; }
  absl::Status Average(int, uint64_t, absl::Span<const float>,
                       absl::Span<float>) override {
    return absl::InternalError("no peers");
  }
  absl::Status SendSegment(int, uint64_t, int, FlatRange,
                           absl::Span<const float>) override {
    return absl::InternalError("no peers");
  }
  std::vector<int> AwaitPeersDone(absl::Duration) override { return {}; }
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_PEER_CLIENT_H_
