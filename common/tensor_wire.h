// The tensor-carrying messages of asgd.v1 (PushChunk, PullChunk), encoded and
// decoded straight to and from gRPC byte buffers, without protobuf objects in
// between. The bytes on the wire are exactly protobuf's: an encoded message
// equals what SerializeAsString() gives for the same fields, and the decoder
// accepts anything protobuf accepts, with protobuf's meaning.
//
// Why: a tensor chunk through protobuf is copied three times on each side
// (zero-filled `bytes` field, copy into it, serialization into slices; parse
// into a std::string on receipt). Here the sender writes the elements once,
// straight into the gRPC slice that goes to the socket (converting to bfloat16
// in the same pass when asked), and the receiver hands views of the received
// slices to ChunkAssembler, which decodes and checks them in one pass.
//
// The decoder has a fast path for the ordinary encoding (each field at most
// once, any field order, unknown fields skipped). Anything else (a repeated
// field, two parts of the oneof, groups, truncation) goes through protobuf's
// own parser, so duplicates merge and the last oneof member wins exactly as
// protobuf says, and bytes protobuf rejects are an InvalidArgument.
//
// Thread-safety: functions are pure; a ReceivedMessage belongs to one thread.
#ifndef ASGD_COMMON_TENSOR_WIRE_H_
#define ASGD_COMMON_TENSOR_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/chunking.h"
#include "common/tensor_messages.h"
#include "common/wire_codec.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/asgd.pb.h"

namespace asgd {

// Owns the bytes a decoded message points into; reuse one per stream.
struct ReceivedMessage {
  std::vector<grpc::Slice> slices;
  std::string scratch;  // fields that straddle slices
  std::string flat;     // the whole message, for the protobuf fallback
  asgd::v1::PushChunk push;
  asgd::v1::PullChunk pull;
};

// Decodes `buffer` into `out` (views into `storage`, which is overwritten).
// InvalidArgument when the bytes are not a valid message.
absl::Status DecodePushChunk(const grpc::ByteBuffer& buffer,
                             ReceivedMessage* storage, PushMessage* out);
absl::Status DecodePullChunk(const grpc::ByteBuffer& buffer,
                             ReceivedMessage* storage, PullMessage* out);

enum class ChunkMessageKind { kPull, kPush };

// A PullChunk or PushChunk carrying one TensorChunk of `count` elements
// encoded as `dtype`, in one freshly allocated slice. `fill` writes the
// count * WireBytes(dtype) data bytes at the pointer it gets (no alignment).
grpc::ByteBuffer EncodeChunkMessage(ChunkMessageKind kind,
                                    uint64_t model_version,
                                    absl::string_view tensor, uint64_t offset,
                                    WireDtype dtype, int64_t count,
                                    absl::FunctionRef<void(char*)> fill);

// A PushChunk carrying one compressed chunk: `data` (compression/
// grad_codec.h bytes) as the TensorChunk's data, with wire dtype
// `push_encoding` (ONE_BIT or TOP_K), copied once into a fresh slice.
grpc::ByteBuffer EncodeCompressedChunkMessage(uint64_t model_version,
                                              absl::string_view tensor,
                                              uint64_t offset,
                                              PushEncoding push_encoding,
                                              absl::string_view data);

// A PullChunk that ends one pull on a PullStream (end_of_pull, no chunk;
// `exact` and the server's `lineage` for a delta pull's reply that leaves
// the copy exact).
grpc::ByteBuffer EncodeEndOfPull(uint64_t model_version, uint64_t num_chunks,
                                 bool exact = false, uint64_t lineage = 0);

// Delta pulls (proto PullRequest.delta), messages with PullChunk.exact set:
// one TensorChunk of `data_bytes` bytes of wire dtype `dtype_value` (float32
// weights, or one compressed chunk of an update) that `fill` writes, in one
// fresh slice; and the header of one update.
grpc::ByteBuffer EncodeExactPullChunk(uint64_t model_version,
                                      absl::string_view tensor,
                                      uint64_t offset, int dtype_value,
                                      int64_t data_bytes,
                                      absl::FunctionRef<void(char*)> fill);
grpc::ByteBuffer EncodeDeltaUpdateHeader(uint64_t model_version,
                                         const asgd::v1::DeltaUpdate& update);

// Small messages (headers, requests, replies) through protobuf.
grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& msg);
// InvalidArgument naming `what` when the bytes do not parse.
absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite* msg,
                                 absl::string_view what);

}  // namespace asgd

#endif  // ASGD_COMMON_TENSOR_WIRE_H_
