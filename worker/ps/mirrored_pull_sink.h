// MirroredPullSink: a PullSink over one of the worker's model buffers whose
// pulled slices the backend keeps, when they come from exact copies it made
// (ModelBackend::MirrorFromCopy: on the GPU, device to device from the
// copies the delta pulls were replayed on). It remembers which slices of the
// buffer came that way in the last pull into it: when all did, mirrored()
// is true and the buffer's model can be loaded from the backend's mirror
// (ModelBackend::LoadMirroredModel) instead of from host memory; a slice
// that arrived as weights (Commit) is only in the buffer.
//
// A slice from a copy is not written to the buffer when it arrives: the
// sink remembers it as not yet downloaded, and Download() brings every such
// slice down from the mirror (ModelBackend::DownloadMirror) when the host
// needs the model: an evaluation, or loading a pull that came partly as
// weights. A worker that only trains on its mirrored models never copies
// them to host memory.
//
//   MirroredPullSink sink(backend, absl::MakeSpan(params));
//   ASGD_RETURN_IF_ERROR(client->Pull(&sink, &versions));
//   if (sink.mirrored()) {
//     backend->LoadMirroredModel(params);
//   } else {
//     ASGD_RETURN_IF_ERROR(sink.Download());
//     backend->LoadModel(params);
//   }
//   ... before reading params on the host:  sink.Download();
//
// Every pull into the buffer must go through its sink, so that what it
// remembers is the last pull's; a pull that fails leaves the buffer unknown
// (as any sink's), and the caller pulls again before using it.
//
// Thread-safety: Staging, Commit and CommitCopy as PullSink (disjoint
// ranges concurrently); mirrored() and Download() once the pull is over.
#ifndef ASGD_WORKER_PS_MIRRORED_PULL_SINK_H_
#define ASGD_WORKER_PS_MIRRORED_PULL_SINK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/model_layout.h"
#include "model/backend.h"
#include "model/exact_copy.h"
#include "worker/ps/param_client.h"
#include "worker/ps/pull_sink.h"

namespace asgd {

class MirroredPullSink final : public PullSink {
 public:
  // `backend` and the memory of `buffer` must outlive the sink.
  MirroredPullSink(ModelBackend* backend, absl::Span<float> buffer)
      : backend_(backend), buffer_(buffer) {}

  int64_t size() const override { return static_cast<int64_t>(buffer_.size()); }
  absl::Span<float> Staging(FlatRange range) override {
    return buffer_.subspan(range.begin, range.size());
  }
  // The range is in the buffer only.
  absl::Status Commit(FlatRange range) override;
  // The backend takes the range from `copy` into its mirror of the buffer;
  // the buffer gets it from there by Download().
  absl::Status CommitCopy(FlatRange range, const ExactCopy& copy) override;

  // Whether every element of the buffer came from copies, mirrored.
  bool mirrored() const;
  // Downloads the mirrored ranges the buffer does not hold yet; after it
  // the buffer holds the last pull's model. The backend's errors (the
  // ranges not downloaded stay marked).
  absl::Status Download();
  // Floats of the buffer waiting for Download(), for checks and tests.
  int64_t pending() const;
  const float* data() const { return buffer_.data(); }

 private:
  ModelBackend* const backend_;
  const absl::Span<float> buffer_;
  mutable absl::Mutex mu_;
  // The ranges mirrored (begin -> size), as the last pull left them.
  std::map<int64_t, int64_t> mirrored_ ABSL_GUARDED_BY(mu_);
  // Those of them whose values are not in the buffer yet.
  std::map<int64_t, int64_t> pending_ ABSL_GUARDED_BY(mu_);
};

// The MirroredPullSinks of a worker's model buffers (the one it computes
// on and the prefetcher's), each made on the first pull into its buffer and
// found by the buffer's memory, at most kMaxBuffers of them: a pull into
// any other buffer is a plain one (For returns null).
//
// Thread-safety: any thread.
class MirroredBuffers {
 public:
  static constexpr int kMaxBuffers = 2;
  // `backend` must outlive this.
  explicit MirroredBuffers(ModelBackend* backend) : backend_(backend) {}

  // The sink of `buffer`, null past kMaxBuffers buffers.
  PullSink* For(absl::Span<float> buffer);
  // Whether the last pull into `buffer` came all from copies (its sink's
  // mirrored()); false for a buffer without a sink.
  bool Mirrored(absl::Span<const float> buffer) const;
  // Brings the buffer's mirrored ranges down into it (its sink's
  // Download()); nothing to do for a buffer without a sink.
  absl::Status Download(absl::Span<const float> buffer);

 private:
  ModelBackend* const backend_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MirroredPullSink>> sinks_ ABSL_GUARDED_BY(mu_);
};

// Pulls the model into `buffer` through its sink in `mirrors`, or plainly
// when `mirrors` is null or has no sink for it.
absl::Status PullInto(ParamClient* client, MirroredBuffers* mirrors,
                      absl::Span<float> buffer,
                      std::vector<uint64_t>* versions);

}  // namespace asgd

#endif  // ASGD_WORKER_PS_MIRRORED_PULL_SINK_H_
