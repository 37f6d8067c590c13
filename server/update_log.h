// UpdateLog: a parameter-server process's most recent updates, kept in the
// compressed form they arrived in, so that a worker holding the server's
// slice exactly as of version b can be sent the updates b+1 .. v (a delta
// pull, proto PullRequest.delta) instead of the weights: a few MB of 1-bit
// chunks instead of the whole slice in float32.
//
// What can be replayed: a compressed gradient (1-bit or top-k) applied by a
// plain SGD step, w = w - lr * (g + weight_decay * w), with the learning rate
// the update was applied with (on a pruned model, under its mask, which the
// worker gets with its exact weights). The store (param_store.h) logs one
// entry per version it admits; an update that cannot be replayed from what
// is kept (a float32 or bfloat16 gradient, an assign, an update whose
// finiteness had to be checked at apply time) is logged as such, and a delta
// pull across it is not possible (the worker gets weights instead).
//
// Memory: the entries' bytes are at most max_bytes (the oldest are dropped
// first), and at most kMaxEntries entries are kept whatever their size.
//
// Thread-safety: thread-safe. Entries are immutable once appended and are
// handed out as shared pointers, so a pull may keep sending one after it was
// dropped from the log.
#ifndef ASGD_SERVER_UPDATE_LOG_H_
#define ASGD_SERVER_UPDATE_LOG_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/wire_codec.h"
#include "step/compressed_apply.h"

namespace asgd {

// One logged update.
struct LoggedUpdate {
  // One compressed chunk of the update: bytes [byte_begin, byte_begin +
  // byte_size) of `bytes`, covering elements [offset, offset + count) of the
  // server's slice.
  struct Chunk {
    int64_t byte_begin = 0;
    int64_t byte_size = 0;
    int64_t offset = 0;
    int64_t count = 0;
  };

  uint64_t version = 0;
  // False: the update cannot be replayed (see above); nothing else is set.
  bool replayable = false;
  // The learning rate the update was applied with (schedule times scale)
  // and the optimizer's weight decay.
  float learning_rate = 0.0f;
  float weight_decay = 0.0f;
  // The chunks' encoding on the wire (ONE_BIT or TOP_K) and their bytes (the
  // grad_codec.h format), laid end to end over the slice in flat order.
  PushEncoding encoding = PushEncoding::kOneBit;
  std::string bytes;
  std::vector<Chunk> chunks;

  // A replayable entry for `gradient` (which must carry its encoded bytes);
  // an unreplayable one when it does not.
  static std::shared_ptr<const LoggedUpdate> Of(
      uint64_t version, const CompressedGradient& gradient,
      float learning_rate, float weight_decay);
  static std::shared_ptr<const LoggedUpdate> Unreplayable(uint64_t version);
};

class UpdateLog {
 public:
  static constexpr size_t kMaxEntries = 4096;

  explicit UpdateLog(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Appends the entry of the next version: one more than the last appended
  // (the first may have any version; a gap empties the log first). Drops
  // the oldest entries beyond max_bytes and kMaxEntries.
  void Append(std::shared_ptr<const LoggedUpdate> update);

  // The updates of versions from + 1 .. to, in order, when every one is
  // still kept, replayable, and their bytes sum to at most `max_bytes`;
  // nullopt otherwise. from == to gives an empty list; from > to, nullopt.
  std::optional<std::vector<std::shared_ptr<const LoggedUpdate>>> Collect(
      uint64_t from, uint64_t to, int64_t max_bytes) const;

  // The newest unreplayable version appended (0: none so far).
  uint64_t last_unreplayable() const;

  int64_t bytes() const;
  size_t size() const;

 private:
  void DropOldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<const LoggedUpdate>> entries_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest unreplayable version kept or dropped (0: none).
  uint64_t last_unreplayable_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace asgd

#endif  // ASGD_SERVER_UPDATE_LOG_H_
