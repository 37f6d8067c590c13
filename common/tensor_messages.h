// Decoded views of the tensor-carrying messages of asgd.v1 (PushChunk,
// PullChunk), independent of any transport: PushAssembler and the pull
// client consume these, whether the bytes came through protobuf (ViewOf) or
// straight from a gRPC byte buffer (tensor_wire.h).
//
// Thread-safety: plain values; a view is valid while what it points into is.
#ifndef ASGD_COMMON_TENSOR_MESSAGES_H_
#define ASGD_COMMON_TENSOR_MESSAGES_H_

#include <cstdint>

#include "common/chunking.h"
#include "proto/asgd.pb.h"

namespace asgd {

// One asgd.v1.PushChunk, decoded. `chunk` points into whatever it was decoded
// from (a ReceivedMessage, or the proto given to ViewOf).
struct PushMessage {
  enum class Part { kNone, kHeader, kChunk, kCommit };
  Part part = Part::kNone;
  uint64_t model_version = 0;
  asgd::v1::PushHeader header;  // when part == kHeader
  uint64_t commit_chunks = 0;   // when part == kCommit
  TensorChunkView chunk;        // when part == kChunk
};

// One asgd.v1.PullChunk, decoded.
struct PullMessage {
  uint64_t model_version = 0;
  bool has_chunk = false;
  TensorChunkView chunk;
  // PullStream: the message that ends one pull, and its chunk count.
  bool end_of_pull = false;
  uint64_t num_chunks = 0;
  // Delta pulls: the header of one update (when has_update), and whether
  // the message belongs to a reply that leaves the copy exact.
  bool has_update = false;
  asgd::v1::DeltaUpdate update;
  bool exact = false;
  uint64_t lineage = 0;
};

// Views of protobuf messages; valid while `msg` is unchanged.
PushMessage ViewOf(const asgd::v1::PushChunk& msg);
PullMessage ViewOf(const asgd::v1::PullChunk& msg);

}  // namespace asgd

#endif  // ASGD_COMMON_TENSOR_MESSAGES_H_
