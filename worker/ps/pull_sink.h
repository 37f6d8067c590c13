// PullSink: where a pull's weights go. The parameter client hands each
// server's slice of the flat model (ModelLayout order) to the sink, so where
// the model lives (host memory, a device) is the caller's business.
//
// For each server the client asks Staging(range) for a host buffer of
// range.size() floats, decodes that server's reply into it, and calls
// Commit(range) once the slice is complete and checked. A pull that fails
// may leave a staging buffer partly written and is not committed; the sink
// must then treat that range as unknown (the caller pulls again).
//
// Example, a device-resident model: Staging returns a pinned host buffer,
// Commit copies it to the device; CommitCopy takes a slice straight from
// the device copy it was replayed on (MirroredPullSink,
// mirrored_pull_sink.h).
//
// Thread-safety: the client calls Staging, Commit and CommitCopy for
// different servers' ranges (disjoint) concurrently; for one range, one
// call at a time.
#ifndef ASGD_WORKER_PS_PULL_SINK_H_
#define ASGD_WORKER_PS_PULL_SINK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model_layout.h"
#include "model/exact_copy.h"

namespace asgd {

class PullSink {
 public:
  virtual ~PullSink() = default;

  // The flat model's size in floats the sink holds.
  virtual int64_t size() const = 0;
  // A host buffer for the values of `range` (range.size() floats), valid
  // until Commit(range) or the end of the pull.
  virtual absl::Span<float> Staging(FlatRange range) = 0;
  // The staging buffer of `range` holds that range's final values.
  virtual absl::Status Commit(FlatRange range) = 0;
  // Instead of Commit, for a delta pull whose exact copy is kept elsewhere
  // (model/exact_copy.h): `copy` holds that range's final values; the
  // staging buffer holds nothing of use. By default they are downloaded
  // into the staging buffer, then committed.
  virtual absl::Status CommitCopy(FlatRange range, const ExactCopy& copy) {
    absl::Status s = copy.Download(Staging(range));
    if (!s.ok()) return s;
    return Commit(range);
  }
};

// A sink over a host buffer of the whole model: staging is the buffer
// itself, so values are decoded in place and Commit does nothing.
class HostPullSink final : public PullSink {
 public:
  explicit HostPullSink(absl::Span<float> params) : params_(params) {}

  int64_t size() const override {
    return static_cast<int64_t>(params_.size());
  }
  absl::Span<float> Staging(FlatRange range) override {
    return params_.subspan(range.begin, range.size());
  }
  absl::Status Commit(FlatRange) override { return absl::OkStatus(); }

 private:
  absl::Span<float> params_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_PULL_SINK_H_
