// ParamClient: how a worker talks to the parameter-server pool, as a small
// interface so training code and tests do not depend on gRPC
// (GrpcParamClient is the real one).
//
// The model is one flat float vector in ModelLayout order; the client splits
// pushes and assembles pulls across the pool's servers. Versions are per
// server: versions[i] is server i's version. A pull hands each server's
// slice to a PullSink (pull_sink.h), so where the model lives (host memory,
// a device) is the caller's business; Pull(span) is the host-memory form.
// A push goes as each server's encoded part (PushEncoded; PushEncoder in
// push_encoder.h makes the parts and keeps the error-feedback residual);
// Push(span) is the host-memory form, with the client's own encoder.
//
// Errors: a server that refused a call because it is overloaded returns
// Unavailable carrying a Refusal (common/refusal.h); a push computed from
// versions the pool never reached (a restarted server), Aborted. Callers
// decide on these codes and the refusal, never on the message.
//
// Thread-safety: implementations allow one push (Push or PushEncoded) and
// one Pull in flight at a time, concurrently with each other and with calls
// of the other methods (a worker computes while its previous push and its
// next model are on the wire); otherwise one thread at a time.
#ifndef ASGD_WORKER_PS_PARAM_CLIENT_H_
#define ASGD_WORKER_PS_PARAM_CLIENT_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "absl/time/time.h"
#include "common/model_layout.h"
#include "common/security_options.h"
#include "common/wire_codec.h"
#include "model/exact_copy.h"
#include "model/model_spec.h"
#include "worker/ps/encoded_push.h"
#include "worker/ps/pull_sink.h"

namespace asgd {

class PushEncoder;  // push_encoder.h

// Minibatch ids from the shared pool (see proto FetchBatchesRequest).
struct PoolGrant {
  std::vector<uint64_t> batch_ids;
  uint64_t batches_per_epoch = 0;
  bool exhausted = false;
};

struct PushOutcome {
  int applied = 0;              // servers that applied their part
  int dropped = 0;              // servers that dropped it as too stale
  uint64_t max_staleness = 0;   // largest staleness any server reported
  bool pull_required = false;   // pull before the next push
};

// The outcome of a push from each server's reply (PushEncoded's, in server
// order): the first server's error, if any, else the replies summed up.
// `failed` (may be null) receives that server's index.
inline absl::StatusOr<PushOutcome> SumUpPushReplies(
    const std::vector<absl::StatusOr<ServerPushReply>>& replies,
    int* failed = nullptr) {
  PushOutcome outcome;
  for (size_t s = 0; s < replies.size(); ++s) {
    if (!replies[s].ok()) {
      if (failed != nullptr) *failed = static_cast<int>(s);
      return replies[s].status();
    }
    const ServerPushReply& r = *replies[s];
    ++(r.applied ? outcome.applied : outcome.dropped);
    outcome.pull_required |= r.pull_required;
    outcome.max_staleness = std::max(outcome.max_staleness, r.staleness);
  }
  return outcome;
}

// What a client's delta pulls did so far (all servers; per-server replies).
struct DeltaPullStats {
  int64_t update_pulls = 0;  // replies with updates only
  int64_t weight_pulls = 0;  // exact replies with weights (then updates)
  int64_t update_bytes = 0;  // compressed update bytes received
  // KeepExactCopiesOn made copies (some server answers delta pulls): the
  // updates are replayed there.
  bool copies_elsewhere = false;
  int64_t plan_bytes = 0;  // replay plans handed to those copies
};

// How a client reaches the pool (see worker/ps/connect.h).
struct PoolClientOptions {
  uint64_t worker_id = 0;
  SecurityOptions security;  // TLS / token (default: none)
  absl::Duration connect_timeout = absl::Seconds(30);
  absl::Duration rpc_timeout = absl::Seconds(60);
  // Encoding of pulled weights (and of pushes, unless push_encoding says
  // otherwise) on the wire. bfloat16 halves the bytes; the servers keep
  // float32 weights either way.
  WireDtype wire_dtype = WireDtype::kFloat32;
  // Encoding of gradient pushes; unset: wire_dtype. kOneBit and kTopK
  // compress each server's part with error feedback: the client keeps a
  // residual per server (compression/grad_encoder.h), and a push that is
  // not applied (refused, failed, dropped as stale) is handed back to it,
  // so the next push carries it. Assign pushes always use wire_dtype.
  std::optional<PushEncoding> push_encoding;
  // kTopK: the share of each chunk's elements sent, in (0, 0.25].
  double top_k_fraction = 0.01;
  // Delta pulls (with float32 pulls, from servers that offer
  // them): the client keeps an exact copy of each server's slice (one more
  // model in memory) and a pull fetches only the compressed updates applied
  // since, replayed on the copy with the server's arithmetic (bit for bit
  // the server's weights); the server sends weights when it cannot.
  bool delta_pulls = true;
  // Threads replaying one server's updates of a delta pull (each a part of
  // the slice; the result is the same bits). 0: by the machine's cores,
  // hardware threads / (2 x servers), between 1 and 4. At most 64.
  int replay_threads = 0;
};

class ParamClient {
 public:
  virtual ~ParamClient() = default;

  virtual const ModelLayout& layout() const = 0;
  // The pool's model; layout().tensors() are ModelTensors(model()).
  virtual const ModelSpec& model() const = 0;
  // Model attributes served by the pool (e.g. "learning_rate").
  virtual const std::map<std::string, std::string>& attributes() const = 0;
  // The most minibatches one push may carry (PushHeader.num_minibatches);
  // 0 when the pool does not say.
  virtual int max_push_minibatches() const { return 0; }

  // Fetches the whole model into `sink` (of layout().total_size() floats),
  // each server's slice committed as it completes, and each server's
  // version into `versions`.
  virtual absl::Status Pull(PullSink* sink,
                            std::vector<uint64_t>* versions) = 0;
  // The same into host memory: `params` holds layout().total_size() floats.
  absl::Status Pull(absl::Span<float> params,
                    std::vector<uint64_t>* versions) {
    HostPullSink sink(params);
    return Pull(&sink, versions);
  }

  // ADMM slot `slot`'s values from every server (their last point from the
  // worker in that slot; PullRequest.admm_slot) into `values`
  // (layout().total_size() floats). InvalidArgument from a server that
  // keeps no such slot.
  virtual absl::Status PullAdmmSlot(int slot, absl::Span<float> values) {
    (void)slot;
    (void)values;
    return absl::UnimplementedError("this client pulls no ADMM slots");
  }

  // Sends each server its encoded part of a push: parts[i] to server i
  // (PushEncoder, push_encoder.h, makes them; all of one kind), computed
  // from the model of `versions`, over `num_minibatches` minibatches.
  // Returns each server's reply or error, in server order; the caller hands
  // each part's fate back to its encoder (PushEncoder::Settle), which
  // restores a part that was not applied into that server's residual.
  // InvalidArgument (for every server) when parts or versions do not have
  // one entry per server.
  virtual std::vector<absl::StatusOr<ServerPushReply>> PushEncoded(
      const std::vector<ServerPush>& parts,
      const std::vector<uint64_t>& versions, int num_minibatches) = 0;

  // Host-memory form: encodes `gradient` (the average over
  // `num_minibatches` minibatches, layout().total_size() floats) with the
  // client's own PushEncoder (PoolClientOptions' encodings, its residual),
  // sends it as PushEncoded does and settles each part. With kAssign,
  // `gradient` holds weights that replace the model. The first server's
  // error, if any, else the servers' replies summed up.
  virtual absl::StatusOr<PushOutcome> Push(
      absl::Span<const float> gradient, const std::vector<uint64_t>& versions,
      int num_minibatches, PushKind kind = PushKind::kGradient) = 0;

  // The encoder Push uses (how each server's part is cut and encoded), for
  // a caller that encodes its pushes itself and sends them by PushEncoded
  // (a resident model's sum, trainer.h); null when the client has none.
  // Valid, and unchanged, for the client's lifetime; its const methods may
  // be called from any thread.
  virtual const PushEncoder* push_encoder() const { return nullptr; }

  // From now on the exact copies of delta pulls (PoolClientOptions::
  // delta_pulls) are made by `factory`, one per server that answers them,
  // sized for its slice, and updates are replayed there (a backend's
  // CreateExactCopy: on its device; pull_reader.h). The copies the client
  // held are dropped, so each server's next pull sends weights. Errors of
  // the factory (the copies made so far are dropped too); Unimplemented for
  // a client without delta pulls. Call it between pulls, not during one.
  virtual absl::Status KeepExactCopiesOn(const ExactCopyFactory& factory) {
    (void)factory;
    return absl::UnimplementedError("this client keeps no exact copies");
  }

  // Counters of the delta pulls so far (zeros for a client without them).
  // Any thread.
  virtual DeltaPullStats delta_pull_stats() const { return {}; }

  // Each server's current version.
  virtual absl::StatusOr<std::vector<uint64_t>> Versions() = 0;

  // Up to `count` minibatch ids from the pool on server 0, for the dataset
  // of run `run_id` (the run's secret, common/pool_run_id.h) of `num_frames`
  // frames in batches of `batch_size`, for `epochs` passes.
  // RESOURCE_EXHAUSTED when the pool has no room for a new dataset now.
  virtual absl::StatusOr<PoolGrant> FetchBatches(const std::string& run_id,
                                                 uint64_t num_frames,
                                                 int batch_size, double epochs,
                                                 int count) = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_PARAM_CLIENT_H_
