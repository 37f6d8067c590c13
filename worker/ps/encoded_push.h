// A push as it goes on the wire, server by server: what PushEncoder
// (push_encoder.h) produces and the parameter client's transport sends.
//
// Float encodings (float32, bfloat16) carry views of the caller's gradient
// (host memory), converted as they are written to the wire, or, for
// bfloat16, views of values already rounded (a backend's TakeBf16), copied
// to the wire as they are; compressed ones (1-bit, top-k) carry the
// grad_codec.h bytes of each chunk.
//
// Thread-safety: plain values; a view is valid while the gradient is.
#ifndef ASGD_WORKER_PS_ENCODED_PUSH_H_
#define ASGD_WORKER_PS_ENCODED_PUSH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/chunking.h"
#include "common/wire_codec.h"

namespace asgd {

enum class PushKind {
  kGradient,  // an optimizer step on the servers
  kAssign,    // replace the servers' weights (warm start, SGD hand-over)
  kAdd,       // add the values to the servers' weights as they are
              // (consensus training, worker/consensus/)
  kAdmm,      // ADMM's point of the worker in slot ServerPush::admm_slot:
              // the servers average it with the other slots' points
};

// One chunk of a server's push.
struct EncodedChunk {
  ChunkRef ref;                     // where it goes in the model
  absl::Span<const float> values;   // float encodings: ref.count values
  std::string bytes;                // compressed encodings: its encoding
  // kBfloat16 without `values`: ref.count bfloat16 values, as sent.
  absl::Span<const uint16_t> bf16;
};

// One server's part of a push, chunk by chunk in plan order.
struct ServerPush {
  PushKind kind = PushKind::kGradient;
  int admm_slot = 0;  // kAdmm only
  // kFloat32 / kBfloat16: `values` sent as that wire dtype; kOneBit /
  // kTopK: `bytes`.
  PushEncoding encoding = PushEncoding::kFloat32;
  std::vector<EncodedChunk> chunks;

  bool compressed() const { return IsCompressed(encoding); }
  // Tensor data bytes of chunk `c` on the wire.
  int64_t data_bytes(const EncodedChunk& c) const {
    return compressed()
               ? static_cast<int64_t>(c.bytes.size())
               : c.ref.count * WireBytes(static_cast<WireDtype>(encoding));
  }
};

// A server's answer to its part of a push.
struct ServerPushReply {
  bool applied = false;        // false: dropped as too stale
  uint64_t staleness = 0;      // versions between the push's and the server's
  bool pull_required = false;  // pull before the next push
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_ENCODED_PUSH_H_
