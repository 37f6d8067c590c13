// PushAssembler: validation and reassembly of one push stream, without any
// transport. The gRPC adapter (grpc_service.cc) feeds it the stream's
// messages in order; tests and fuzzers feed it directly.
//
// A push is: one header (worker id, base version, 1 <= num_minibatches <=
// the store's max_push_minibatches, kind GRADIENT or ASSIGN), then
// TensorChunks that cover exactly this server's range in layout order (see
// common/chunking.h), then a commit carrying the chunk count. Every message
// must carry the header's version. Chunk values (float32 or bfloat16 on the
// wire) are decoded into a staging buffer of range().size() floats, taken
// from the store's capped pool of reusable buffers when the first chunk
// arrives (a stream that sends nothing, or only a header, holds no buffer);
// nothing reaches the store here. The store's push memory budget is charged
// chunk by chunk, before each chunk is written, with the bytes it stages
// (float32 values, or a compressed chunk's bytes): a push holds as much of
// the budget as it has sent, so streams that send a little and stall cannot
// take the budget from others (staging_pool.h).
//
//   PushAssembler assembler(store);
//   for (const PushMessage& msg : stream) {  // or PushChunk protos
//     absl::Status s = assembler.Add(msg);
//     if (!s.ok()) { store->CountRejected(assembler.reject_reason()); ...; }
//     if (assembler.committed()) {
//       store->Submit(assembler.TakeRequest(), done);
//       break;
//     }
//   }
//   // The stream ended without a commit:
//   absl::Status s = assembler.EndOfStream();  // InvalidArgument, kIncomplete
//
// Compressed pushes: when the first chunk is ONE_BIT or TOP_K (and the store
// takes compressed pushes), its bytes and every later chunk's are copied
// into the same staging buffer (its range().size() * 4 bytes bound them: a
// push larger than its float32 form is refused) and parsed at once
// (compression/grad_codec.h, with the store's max_compressed_chunk_elements);
// the commit yields a CompressedGradient viewing that buffer, so the memory
// budget and the all-or-nothing rules are those of float pushes. A chunk that
// does not parse, an encoding the store does not take, a push that mixes
// encodings, or a compressed ASSIGN or ADD is refused with InvalidArgument
// (kBadEncoding; kBadHeader for the ASSIGN or ADD). The chunk order rules are those
// of float chunks (common/chunking.h ChunkSequence).
//
// Outcome: the first error is final. Add() returns InvalidArgument with a
// message for the sender (or, when the store's staging memory is all in use,
// Unavailable with Refusal::kPushMemory and reason kPushMemory),
// reject_reason() tells why (a metric label), and the staging buffer is
// released at once (holds_staging() is false), so a rejected push can never
// be applied, not even in part. Calls after an error or after the commit
// change nothing and return InvalidArgument.
//
// Counting rejections is the caller's job (the assembler never touches the
// store); version checks against the store's current version happen in
// ParamStore::Submit.
//
// Thread-safety: one thread at a time (one per push stream). The store must
// outlive the assembler; only its layout, range and options are read.
#ifndef ASGD_SERVER_PUSH_ASSEMBLER_H_
#define ASGD_SERVER_PUSH_ASSEMBLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/chunking.h"
#include "common/tensor_messages.h"
#include "proto/asgd.pb.h"
#include "compression/grad_codec.h"
#include "server/param_store.h"
#include "step/compressed_apply.h"

namespace asgd {

class PushAssembler {
 public:
  explicit PushAssembler(const ParamStore* store);

  PushAssembler(const PushAssembler&) = delete;
  PushAssembler& operator=(const PushAssembler&) = delete;

  // Accepts the next message of the stream. OK: the message was valid (for a
  // commit, committed() is now true). InvalidArgument: the push is rejected
  // (see reject_reason()).
  absl::Status Add(const PushMessage& msg);
  absl::Status Add(const asgd::v1::PushChunk& msg) { return Add(ViewOf(msg)); }

  // The stream ended. Before a commit this rejects the push (kIncomplete) and
  // returns InvalidArgument; after a commit or an earlier error it returns
  // OK and changes nothing.
  absl::Status EndOfStream();

  // True once a valid commit arrived after a valid sequence.
  bool committed() const { return committed_; }
  // True once the push is rejected.
  bool rejected() const { return rejected_; }
  // Why the push was rejected; meaningful when rejected().
  RejectReason reject_reason() const { return reason_; }

  // The complete update, to hand to ParamStore::Submit. Call once, after
  // committed(); later calls return a request without values.
  PushRequest TakeRequest();

  // The transport ended the stream without a verdict from the assembler
  // (e.g. it stalled): releases the staging buffer; later calls are refused.
  void Abandon();

  // Chunk payload bytes handed to the chunk check so far (the wire bytes the
  // server examined; a metric).
  int64_t chunk_bytes() const { return chunk_bytes_; }
  // True while the assembler holds a staging buffer: from the first valid
  // chunk until a rejection or TakeRequest().
  bool holds_staging() const { return staging_ != nullptr; }
  // Chunks accepted so far.
  int64_t chunks_received() const;
  // How the push's chunks are encoded (known from its first chunk on; a
  // float push that mixes float32 and bfloat16 chunks reports its first).
  PushEncoding encoding() const { return encoding_; }

 private:
  absl::Status Reject(RejectReason reason, absl::Status status);
  // The first chunk: picks float or compressed assembly, takes staging.
  absl::Status StartChunks(const TensorChunkView& chunk);
  // The header's checks and fields (a second header is Add's to refuse).
  absl::Status AcceptHeader(const asgd::v1::PushHeader& h);
  absl::Status AddCompressed(const TensorChunkView& chunk);
  // The bytes of staging memory `chunk` takes once written.
  int64_t StagedBytes(const TensorChunkView& chunk) const;
  absl::Status RejectPushMemory();

  const ParamStore* const store_;
  std::shared_ptr<std::vector<float>> staging_;
  std::optional<ChunkAssembler> chunks_;  // a float push, from its first chunk
  // A compressed push, from its first chunk: the order checks, the parsed
  // chunks (views into staging_) and the bytes of staging_ they use.
  std::optional<ChunkSequence> compressed_sequence_;
  std::vector<CompressedChunk> compressed_chunks_;
  int64_t compressed_bytes_ = 0;
  std::vector<int64_t> compressed_sizes_;  // bytes of each chunk
  float compressed_max_abs_ = 0.0f;
  PushEncoding encoding_ = PushEncoding::kFloat32;
  bool have_header_ = false;
  bool committed_ = false;
  bool rejected_ = false;
  RejectReason reason_ = RejectReason::kCount;
  int64_t chunk_bytes_ = 0;
  uint64_t base_version_ = 0;
  int num_minibatches_ = 1;
  uint64_t worker_id_ = 0;
  PushRequest::Kind kind_ = PushRequest::Kind::kGradient;
  int64_t admm_slot_ = 0;  // the header's (checked against the store)
};

}  // namespace asgd

#endif  // ASGD_SERVER_PUSH_ASSEMBLER_H_
