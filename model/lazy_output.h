// Lazy output evaluation for decoding: the output layer's scores of only the
// pdfs a decoder asks for at each frame, instead of all num_classes.
//
// A decoder compares the states of one frame with each other (Viterbi
// search, beam pruning relative to the frame's best), so the log-softmax's
// normaliser, log sum_j exp z_j, the same for every state of a frame, can be
// left out: the lazy score of pdf p at frame f is its logit
//   z[f][p] = bias[p] + weight[p] . h[f]
// (h: what enters the output layer), which is the full log-posterior plus a
// constant per frame. With a share a of the pdfs active it costs a of the
// output layer's multiply-adds, as one dot product per (frame, pdf): every
// active row of the weight is read once per frame. Against one frame at a
// time through the full layer (a matrix-vector product that reads the whole
// weight per frame) that is a gain; against a batch of frames through one
// matrix-matrix product, which reads the weight once per batch, it usually is
// not (bench/lazy_output_bench measures both).
//
//   ASGD_ASSIGN_OR_RETURN(OutputLayerView out, OutputLayerOf(spec, params));
//   ActiveOutputs active = ...;  // per frame, the pdfs the decoder asks for
//   ASGD_RETURN_IF_ERROR(CheckActiveOutputs(active, frames, out.classes));
//   std::vector<float> scores(active.pdfs.size());
//   LazyLogits(out, h, active, scores.data());
//
// Thread-safety: pure functions over caller-owned buffers.
#ifndef ASGD_MODEL_LAZY_OUTPUT_H_
#define ASGD_MODEL_LAZY_OUTPUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/model_spec.h"

namespace asgd {

// The output layer's parameters inside a flat model: weight [classes, in]
// (row-major), bias [classes].
struct OutputLayerView {
  const float* weight = nullptr;
  const float* bias = nullptr;
  int in = 0;
  int classes = 0;
};

// The output layer of `spec` in `params` (viewed, not copied).
// InvalidArgument for an invalid spec, a parameter count not the spec's, or a
// multi-frame model.
absl::StatusOr<OutputLayerView> OutputLayerOf(const ModelSpec& spec,
                                              absl::Span<const float> params);

// Per frame, the pdfs asked for, in CSR form: frame f's are
// pdfs[begin[f], begin[f + 1]), in any order, repeats allowed.
struct ActiveOutputs {
  std::vector<int64_t> begin = {0};  // frames + 1 offsets
  std::vector<int32_t> pdfs;

  int64_t frames() const { return static_cast<int64_t>(begin.size()) - 1; }
  // Appends a frame with these pdfs.
  void AddFrame(absl::Span<const int32_t> frame_pdfs) {
    pdfs.insert(pdfs.end(), frame_pdfs.begin(), frame_pdfs.end());
    begin.push_back(static_cast<int64_t>(pdfs.size()));
  }
};

// InvalidArgument unless `active` has `frames` frames, begin starts at 0,
// never decreases and ends at pdfs.size(), and every pdf is in
// [0, classes).
absl::Status CheckActiveOutputs(const ActiveOutputs& active, int64_t frames,
                                int classes);

// out[k] = bias[p] + weight[p] . h[f] for every active k (pdf p of frame f),
// h being frames x layer.in (row-major). `active` must have passed
// CheckActiveOutputs for layer.classes.
void LazyLogits(const OutputLayerView& layer, const float* h,
                const ActiveOutputs& active, float* out);

// The full layer, for comparison: out = h W^T + bias, frames x classes
// (one matrix-matrix product; one frame is a matrix-vector product).
void FullLogits(const OutputLayerView& layer, const float* h, int64_t frames,
                float* out);

}  // namespace asgd

#endif  // ASGD_MODEL_LAZY_OUTPUT_H_
