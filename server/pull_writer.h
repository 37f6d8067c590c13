// PullWriter: what one pull sends, message by message, with no transport in
// it. A pull of weights is this server's range chunk by chunk (in the order
// of the layout's tensors and increasing offset, at most max_chunk_elements
// elements a chunk), each chunk copied from the live weights (or from the
// worker's DC-ASGD copy) when it is taken, then, on a stream, one end-of-pull
// message. A delta pull's reply (a DeltaPlan, server/delta_pulls.h) sends the
// plan's base weights, if any (exact float32; for a pruned model each chunk
// followed by its mask, a PRUNE_MASK chunk of the same tensor and offset),
// then each update's header and its compressed chunks, every message marked
// exact, then the end-of-pull message with the server's lineage.
//
// The gRPC adapters (grpc_*_reactor.cc) turn each PullPart into the bytes
// of one asgd.v1.PullChunk (common/tensor_wire.h); a test reads the messages
// directly.
//
// Example:
//   PullWriter writer(store, metrics, worker_id, WireDtype::kFloat32,
//                     /*end_marker=*/true);
//   PullPart m;
//   while (writer.Next(&m)) Send(m);
//
// Thread-safety: a PullWriter is used by one thread at a time (its call's
// reactor, under the reactor's lock); the store and metrics it reads are
// thread-safe. The store (and metrics, when not null) must outlive it.
#ifndef ASGD_SERVER_PULL_WRITER_H_
#define ASGD_SERVER_PULL_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/chunking.h"
#include "common/wire_codec.h"
#include "server/delta_pulls.h"
#include "server/param_store.h"
#include "server/server_metrics.h"

namespace asgd {

// InvalidArgument unless a pull can be served in `dtype` (a wire dtype as
// sent).
absl::Status CheckPullDtype(int dtype);

// InvalidArgument unless `store` can serve a pull of ADMM slot `slot`
// (PullRequest.admm_slot): a slot it keeps, and not a delta pull.
absl::Status CheckSlotPull(const ParamStore& store, uint32_t slot, bool delta);

// One message of a pull (one asgd.v1.PullChunk).
struct PullPart {
  enum class Kind {
    kChunk,         // weights in `dtype`: `count` elements
    kExactChunk,    // exact: `data_bytes` bytes of wire dtype `dtype_value`
                    // (float32 base weights, a pruned model's mask of the
                    // base chunk before, or one compressed update chunk)
    kUpdateHeader,  // exact: the header of one update (its chunks follow)
    kEndOfPull,     // ends the pull: `num_chunks` chunks came before it
  };
  Kind kind = Kind::kChunk;
  uint64_t model_version = 0;
  // kChunk, kExactChunk: the tensor's name (empty for an update's chunk),
  // the first element's offset, and what writes the data bytes (no
  // alignment) when the message is encoded; valid while the writer lives.
  std::string tensor;
  uint64_t offset = 0;
  WireDtype dtype = WireDtype::kFloat32;
  int64_t count = 0;
  int dtype_value = 0;
  int64_t data_bytes = 0;
  std::function<void(char*)> fill;
  // kUpdateHeader: the update (DeltaUpdate fields).
  uint64_t update_version = 0;
  float learning_rate = 0.0f;
  float weight_decay = 0.0f;
  // kUpdateHeader: the update's chunks; kEndOfPull: the pull's chunks.
  uint64_t num_chunks = 0;
  // kEndOfPull: a delta reply that leaves the copy exact, and the lineage.
  bool exact = false;
  uint64_t lineage = 0;
};

class PullWriter {
 public:
  // A pull of weights in `dtype` at the store's current version (counted as
  // a pull of weights); `end_marker`: end with a kEndOfPull message. With
  // `admm_slot` >= 0 (checked by CheckSlotPull), that ADMM slot's values
  // instead of the weights.
  PullWriter(ParamStore* store, ServerMetrics* metrics, uint64_t worker_id,
             WireDtype dtype, bool end_marker, int admm_slot = -1);

  // A delta pull's reply (float32), ending with the server's lineage.
  PullWriter(ParamStore* store, ServerMetrics* metrics, DeltaPlan plan,
             uint64_t lineage);

  PullWriter(const PullWriter&) = delete;
  PullWriter& operator=(const PullWriter&) = delete;

  // The next message; false once every one was given. The message's `fill`
  // must run before the next call to Next().
  bool Next(PullPart* msg);

 private:
  void Count(ServerMetrics::PullForm form);
  void NextWeights(PullPart* msg);
  void NextUpdatePart(PullPart* msg);
  // The mask of the base weights' chunk just sent.
  void NextMask(PullPart* msg);

  ParamStore* const store_;
  ServerMetrics* const metrics_;
  const WireDtype dtype_;
  bool end_marker_;
  const std::vector<ChunkRef> chunks_;
  const uint64_t version_;
  // Set when the store keeps the worker's model for delay compensation: the
  // pull then serves exactly that copy.
  const std::shared_ptr<const std::vector<float>> snapshot_;
  const int admm_slot_;  // >= 0: serve that ADMM slot
  // A delta pull's reply.
  std::optional<DeltaPlan> plan_;
  uint64_t lineage_ = 0;
  size_t next_ = 0;
  bool mask_next_ = false;  // a pruned model's base: a chunk's mask is next
  size_t next_update_ = 0;
  int64_t next_update_chunk_ = -1;  // -1: the header is next
  uint64_t sent_chunks_ = 0;        // messages with a TensorChunk
};

}  // namespace asgd

#endif  // ASGD_SERVER_PULL_WRITER_H_
