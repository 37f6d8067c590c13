// GrpcPeerClient: PeerClient over gRPC to the other workers' PeerServers.
//
// Create() connects to every other worker of the group (waiting up to
// connect_timeout for workers that are still starting) and checks with
// Describe that each is the worker its position in `addresses` says and
// agrees on the group (size, model, mode, topology): the start barrier of a
// decentralized run. One channel per peer, reused; every call has a
// deadline: average_timeout for an averaging exchange (a slow or dead peer
// costs at most that), send_timeout for an allreduce message.
//
// Thread-safety: thread-safe (stubs are; the client's state is immutable
// after Create()).
#ifndef ASGD_WORKER_PEER_PEER_GRPC_CLIENT_H_
#define ASGD_WORKER_PEER_PEER_GRPC_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/chunking.h"
#include "common/grpc_security.h"
#include "common/model_layout.h"
#include "proto/peer.grpc.pb.h"
#include "worker/peer/peer_client.h"
#include "worker/peer/peer_grpc_wire.h"

namespace asgd {

struct GrpcPeerClientOptions {
  PeerGroup group;           // this worker's
  SecurityOptions security;  // TLS / token (default: none)
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration average_timeout = absl::Seconds(5);
  absl::Duration send_timeout = absl::Seconds(60);
  int64_t max_chunk_elements = kDefaultMaxChunkElements;
};

class GrpcPeerClient final : public PeerClient {
 public:
  // `addresses`: every worker's peer address (host:port) in worker-index
  // order, this worker's included (not connected to). `layout` must outlive
  // the client. InvalidArgument for a list of the wrong length;
  // FailedPrecondition for a peer of another group or at another index;
  // DeadlineExceeded/Unavailable for a peer that did not answer in time.
  static absl::StatusOr<std::unique_ptr<GrpcPeerClient>> Create(
      const std::vector<std::string>& addresses, const ModelLayout* layout,
      const GrpcPeerClientOptions& options);

  int worker_index() const override { return options_.group.worker_index; }
  int num_workers() const override { return options_.group.num_workers; }
  absl::Status Average(int peer, uint64_t step, absl::Span<const float> mine,
                       absl::Span<float> theirs) override;
  absl::Status SendSegment(int peer, uint64_t iteration, int round,
                           FlatRange range,
                           absl::Span<const float> values) override;
  std::vector<int> AwaitPeersDone(absl::Duration timeout) override;

 private:
  GrpcPeerClient(const ModelLayout* layout, GrpcPeerClientOptions options)
      : layout_(layout), options_(std::move(options)) {}

  absl::Status CheckPeer(int peer) const;
  absl::Status WithPeer(int peer, absl::Status status) const;

  const ModelLayout* const layout_;
  const GrpcPeerClientOptions options_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<asgd::v1::Peer::Stub>> stubs_;  // null: self
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_PEER_GRPC_CLIENT_H_
