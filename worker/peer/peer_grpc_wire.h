// What both ends of the Peer service (proto/peer.proto) share: the group a
// worker belongs to and the chunked transfer of a flat range of floats
// (header, TensorChunks, commit), checked on arrival with ChunkAssembler
// exactly like pushes to the parameter servers.
//
// Thread-safety: PeerGroup helpers are pure. An OutgoingTransfer is
// immutable once built; an IncomingTransfer is used by one thread at a time.
#ifndef ASGD_WORKER_PEER_PEER_GRPC_WIRE_H_
#define ASGD_WORKER_PEER_PEER_GRPC_WIRE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "proto/peer.pb.h"

namespace asgd {

// The workers training together; every member must agree on all but the
// index.
struct PeerGroup {
  int worker_index = 0;
  int num_workers = 1;
  std::string layout_fingerprint;
  std::string mode;      // "adpsgd" or "allreduce"
  std::string topology;  // adpsgd: "fixed_ring" or "random_ring"
  uint64_t topology_seed = 1;
};

asgd::v1::PeerHello ToHello(const PeerGroup& group);

// OK when `theirs` is another member of `mine`'s group; FailedPrecondition
// saying what differs otherwise.
absl::Status CheckSameGroup(const PeerGroup& mine,
                            const asgd::v1::PeerHello& theirs);

// The messages that carry `values` (range.size() floats) for `range` of
// `layout`: a header (the given one, with begin and end set), the chunks of
// PlanChunks(), a commit.
class OutgoingTransfer {
 public:
  OutgoingTransfer(const ModelLayout* layout, asgd::v1::PeerHeader header,
                   FlatRange range, const float* values,
                   int64_t max_chunk_elements);

  size_t num_messages() const { return chunks_.size() + 2; }
  // Writes message i (0 <= i < num_messages()) into `msg`.
  void Fill(size_t i, asgd::v1::PeerMessage* msg) const;

 private:
  const ModelLayout* layout_;
  asgd::v1::PeerHeader header_;
  FlatRange range_;
  const float* values_;
  std::vector<ChunkRef> chunks_;
};

// Receives one transfer, message by message.
class IncomingTransfer {
 public:
  // Called with the header; returns the range the transfer must cover, or
  // the error to reject it with.
  using Expect =
      std::function<absl::StatusOr<FlatRange>(const asgd::v1::PeerHeader&)>;

  IncomingTransfer(const ModelLayout* layout, int64_t max_chunk_elements,
                   Expect expect);

  // Takes the next message. InvalidArgument (or what `expect` returned) for
  // anything out of place: no header first, a second header, a bad chunk
  // (ChunkAssembler), NaN or Inf, a commit that does not match, a message
  // after the commit. After an error every call fails.
  absl::Status Add(const asgd::v1::PeerMessage& msg);

  bool committed() const { return committed_; }
  // Valid once the header arrived.
  const asgd::v1::PeerHeader& header() const { return header_; }
  // The values, once committed.
  std::vector<float>& values() { return values_; }

 private:
  absl::Status Fail(absl::Status status);

  const ModelLayout* layout_;
  const int64_t max_chunk_elements_;
  Expect expect_;
  asgd::v1::PeerHeader header_;
  bool have_header_ = false;
  bool committed_ = false;
  absl::Status error_;
  std::vector<float> values_;
  std::optional<ChunkAssembler> assembler_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PEER_PEER_GRPC_WIRE_H_
