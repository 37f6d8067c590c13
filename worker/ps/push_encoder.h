// PushEncoder: turns a worker's flat gradient (ModelLayout order) into each
// server's encoded push (encoded_push.h), and owns the error-feedback
// residual of every server's range with its restore policy.
//
// Float encodings: the server's range in chunks of at most
// max_chunk_elements, as views of the gradient (nothing is copied).
// Compressed encodings (1-bit, top-k) of gradient pushes: chunks of at most
// compressed_chunk_elements, each encoded by that server's GradEncoder
// (compression/grad_encoder.h), which adds the residual it kept for those
// elements and keeps what the encoding lost. Assign and add pushes are
// never compressed: they travel as wire_dtype.
//
// Restore policy: a push a server did not apply (refused, failed, dropped as
// stale) is handed back with Settle(applied = false): its chunks' decoded
// values go back into that server's residual, so the next push carries them
// (never resent). An applied push changes nothing more.
//
// Example:
//   ASSIGN_OR_RETURN(ServerPush p, encoder->Encode(s, gradient, kind));
//   absl::StatusOr<bool> applied = Send(s, p);   // the transport
//   encoder->Settle(s, p, applied.ok() && *applied);
//
// Thread-safety: calls for different servers may run concurrently; for one
// server, one call at a time (Encode then Settle of the same push).
// one_bit_plan(), top_k_plan(), SplitOneBit, SplitTopK, SplitBf16 and
// ForEachDecoded read only what Create fixed: from any thread, at any time.
#ifndef ASGD_WORKER_PS_PUSH_ENCODER_H_
#define ASGD_WORKER_PS_PUSH_ENCODER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/wire_codec.h"
#include "compression/grad_encoder.h"
#include "compression/one_bit_plan.h"
#include "compression/top_k_plan.h"
#include "worker/ps/encoded_push.h"

namespace asgd {

struct PushEncoderOptions {
  // Encoding of assign and add pushes (and of float gradient pushes unless
  // push_encoding says otherwise).
  WireDtype wire_dtype = WireDtype::kFloat32;
  // Encoding of gradient pushes; unset: wire_dtype.
  std::optional<PushEncoding> push_encoding;
  // kTopK: the share of each chunk's elements sent, in (0, 1].
  double top_k_fraction = 0.01;
  // Float chunks: the pool's chunk limit (at least 1).
  int64_t max_chunk_elements = 0;
  // Compressed chunks: at least 1 (see CompressedChunkElements).
  int64_t compressed_chunk_elements = 0;
};

class PushEncoder {
 public:
  // InvalidArgument for chunk limits below 1 (compressed ones only with a
  // compressed push encoding) or what GradEncoder::Create refuses.
  static absl::StatusOr<std::unique_ptr<PushEncoder>> Create(
      const ModelLayout& layout, const PushEncoderOptions& options);

  // Elements per compressed chunk: as many as the servers take
  // (`server_limit`, the smallest max_compressed_chunk_elements) within
  // about 3 MiB of encoded bytes at the encoding's worst case (1-bit: 1/8
  // byte per element plus 8 bytes per group; top-k: 8 bytes per element
  // sent); at least 1.
  static int64_t CompressedChunkElements(const ModelLayout& layout,
                                         PushEncoding encoding,
                                         double top_k_fraction,
                                         uint64_t server_limit);

  // Server `server`'s part of `gradient` (layout.total_size() floats, which
  // must outlive the result when it is a float push). A compressed gradient
  // push moves the server's residual on. InvalidArgument for NaN/Inf in a
  // chunk (gradient + residual): that chunk's residual is unchanged and the
  // chunks before it go back into the residual, as for a push not applied.
  absl::StatusOr<ServerPush> Encode(int server,
                                    absl::Span<const float> gradient,
                                    PushKind kind);

  // Server `server`'s part of `values` as an assign or add push (kAssign,
  // kAdd; never compressed): wire_dtype views of `values`, which must
  // outlive the result. Touches no residual: callable from any thread.
  ServerPush EncodeUncompressed(int server, absl::Span<const float> values,
                                PushKind kind) const;

  // The fate of `push`, which Encode(server, ...) returned: when not
  // applied, a compressed push goes back into the server's residual.
  void Settle(int server, const ServerPush& push, bool applied);

  // The 1-bit chunks of every server's gradient pushes, in server order, as
  // one plan for an encoder that holds the whole gradient (a backend's
  // resident sum, model/backend.h TakeOneBit): the chunks and groups Encode
  // uses. Empty unless gradient pushes are kOneBit.
  const OneBitPlan& one_bit_plan() const { return one_bit_plan_; }

  // Each server's push of `bytes`, an encoding of the whole one_bit_plan()
  // (each chunk's bytes copied). InvalidArgument for another size.
  absl::StatusOr<std::vector<ServerPush>> SplitOneBit(
      absl::Span<const char> bytes) const;

  // The top-k chunks of every server's gradient pushes, in server order, as
  // one plan (a backend's resident sum, model/backend.h TakeTopK): the
  // chunks and k Encode uses. Empty unless gradient pushes are kTopK.
  const TopKPlan& top_k_plan() const { return top_k_plan_; }

  // Each server's push of `chunks`, an encoding of the whole top_k_plan()
  // (one string per chunk, moved into the pushes). InvalidArgument for
  // another number of chunks.
  absl::StatusOr<std::vector<ServerPush>> SplitTopK(
      std::vector<std::string> chunks) const;

  // Each server's bfloat16 gradient push of `values`, the whole model
  // already rounded to bfloat16 (a backend's resident sum, model/backend.h
  // TakeBf16): the chunks Encode uses, as views of `values`, which must
  // outlive the result. InvalidArgument unless gradient pushes are
  // kBfloat16 and `values` is model-sized.
  absl::StatusOr<std::vector<ServerPush>> SplitBf16(
      absl::Span<const uint16_t> values) const;

  // Hands the decoded values of each chunk of a compressed `push` to
  // `restore` (flat_begin, values): how a caller that keeps the residual
  // itself takes back a push that was not applied. InvalidArgument for
  // bytes that do not decode (then nothing was handed on).
  static absl::Status ForEachDecoded(
      const ServerPush& push,
      const std::function<absl::Status(int64_t flat_begin,
                                       absl::Span<const float> values)>&
          restore);

  // The encoding gradient pushes use.
  PushEncoding encoding() const { return encoding_; }
  // The residual of server `server`'s range (empty with a float encoding).
  std::vector<float> Residual(int server) const;

 private:
  struct PerServer {
    FlatRange range;
    std::vector<ChunkRef> float_plan;
    std::vector<ChunkRef> compressed_plan;
    mutable absl::Mutex mu;
    std::optional<GradEncoder> encoder ABSL_GUARDED_BY(mu);
  };

  PushEncoder(const PushEncoderOptions& options, PushEncoding encoding)
      : options_(options), encoding_(encoding) {}

  const PushEncoderOptions options_;
  const PushEncoding encoding_;
  std::vector<std::unique_ptr<PerServer>> servers_;
  OneBitPlan one_bit_plan_;
  TopKPlan top_k_plan_;
  std::vector<size_t> first_chunk_;  // per server: its first in the plan
  int64_t model_size_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_PUSH_ENCODER_H_
