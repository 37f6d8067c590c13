// onnx_reference: writes, for each model kind, an exported ONNX model, one
// utterance's input rows and asgd's own log-posteriors of them (the CPU
// backend, the whole utterance as one sequence, as asgd_forward runs it),
// for tests/onnx_runtime_test.js to compare with onnxruntime's.
//
//   onnx_reference --out=DIR
// writes DIR/<kind>.onnx, DIR/<kind>.input.f32 ([frames, input_dim] float32
// little-endian), DIR/<kind>.expected.f32 ([frames, output_dim]: the
// classes, times the heads of a multi-frame model) and DIR/manifest.txt
// (`kind frames input_dim output_dim` per line).
//
// The models: a DNN (relu and tanh layers), a CNN (two conv layers, one
// pooled, sigmoid), an LSTM with a recurrent projection and cell clipping
// over 2 layers, a BLSTM likewise, and a multi-frame DNN of 3 heads (every
// row's heads, from the backend, as the graph gives them). Their clipping
// is checked to be active: the same model without it must give other
// log-posteriors (by more than 1e-2), or the tool fails.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "model/cpu_backend.h"
#include "model/onnx_export.h"
#include "worker/data/frame_examples.h"
#include "worker/data/utterances.h"
#include "worker/utterance_scorer.h"

ABSL_FLAG(std::string, out, "", "Output directory (must exist).");

namespace asgd {
namespace {

struct Case {
  std::string kind;
  ModelSpec spec;
  int frames;
};

std::vector<Case> Cases() {
  ModelSpec dnn;
  dnn.feature_dim = 13;
  dnn.context = 3;
  dnn.num_classes = 17;
  dnn.layers = {LayerSpec::Dense(32, Activation::kRelu),
                LayerSpec::Dense(24, Activation::kTanh)};
  ModelSpec cnn = dnn;
  cnn.feature_dim = 20;
  cnn.context = 2;
  ConvLayerSpec a;
  a.filters = 6;
  a.kernel_time = 3;
  a.kernel_freq = 5;
  a.pool_time = 1;
  a.pool_freq = 2;
  ConvLayerSpec b;
  b.filters = 4;
  b.kernel_time = 2;
  b.kernel_freq = 3;
  b.pool_time = 1;
  b.pool_freq = 1;
  b.activation = Activation::kSigmoid;
  cnn.layers = {LayerSpec::Conv(a), LayerSpec::Conv(b),
                LayerSpec::Dense(16, Activation::kRelu)};
  ModelSpec lstm = dnn;
  lstm.context = 0;
  LstmLayerSpec l;
  l.cells = 24;
  l.projection = 12;
  l.cell_clip = 0.6f;
  lstm.layers = {LayerSpec::Lstm(l), LayerSpec::Lstm(l),
                 LayerSpec::Dense(16, Activation::kRelu)};
  ModelSpec blstm = lstm;
  l.bidirectional = true;
  blstm.layers = {LayerSpec::Lstm(l), LayerSpec::Lstm(l)};
  ModelSpec multi = dnn;  // a multi-frame model: 3 heads
  multi.output_frames = 3;
  return {{"dnn", dnn, 57},      {"cnn", cnn, 41},
          {"lstm", lstm, 150},   {"blstm", blstm, 150},
          {"multi", multi, 57}};
}

absl::Status WriteFloats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out.flush()) return absl::DataLossError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Score(const ModelSpec& spec,
                                         const std::vector<float>& params,
                                         const std::vector<float>& features,
                                         int frames) {
  auto scorer = UtteranceScorer::Create(spec, params, CpuBackendFactory());
  if (!scorer.ok()) return scorer.status();
  std::vector<float> out;
  absl::Status s = (*scorer)->LogPosteriors(features, frames, &out);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<float>> AllHeads(const ModelSpec& spec,
                                            const std::vector<float>& params,
                                            const std::vector<float>& input,
                                            int frames) {
  auto backend = CreateCpuBackend(spec, frames);
  if (!backend.ok()) return backend.status();
  std::vector<float> out(int64_t{frames} * spec.output_dim());
  absl::Status s = (*backend)->LogPosteriors(
      params, Batch{frames, 1, input, {}}, absl::MakeSpan(out));
  if (!s.ok()) return s;
  return out;
}

absl::Status Run(const std::string& dir) {
  std::string manifest;
  uint32_t seed = 11;
  for (const Case& c : Cases()) {
    const ModelSpec& spec = c.spec;
    std::mt19937 rng(seed++);
    // Weights as initialised, with biases drawn too, and speech-like
    // features (large enough to drive the cells into their clip).
    std::vector<float> params = InitialParams(spec, seed);
    std::normal_distribution<float> small(0, 0.3f);
    for (float& p : params) p += 0.2f * small(rng);
    std::normal_distribution<float> normal(0, 2.0f);
    std::vector<float> features(int64_t{c.frames} * spec.feature_dim);
    for (float& f : features) f = normal(rng);

    // The input rows: each frame with its context, as training makes them.
    Utterances utt(spec.feature_dim);
    utt.Add(features, std::vector<int32_t>(c.frames, 0));
    FrameExamples rows(&utt, spec.context);
    std::vector<float> input(int64_t{c.frames} * spec.input_dim());
    for (int t = 0; t < c.frames; ++t) rows.Splice(t, &input[t * spec.input_dim()]);

    // A multi-frame model's graph gives every row's heads: the backend's
    // log-posteriors of every row (a decoder uses every 3rd).
    auto expected = spec.output_frames > 1
                        ? AllHeads(spec, params, input, c.frames)
                        : Score(spec, params, features, c.frames);
    if (!expected.ok()) return expected.status();
    if (spec.is_sequence()) {
      ModelSpec unclipped = spec;
      for (LayerSpec& l : unclipped.layers) l.lstm.cell_clip = 0;
      auto other = Score(unclipped, params, features, c.frames);
      if (!other.ok()) return other.status();
      float largest = 0;
      for (size_t i = 0; i < other->size(); ++i) {
        largest = std::max(largest, std::abs((*other)[i] - (*expected)[i]));
      }
      if (largest < 1e-2f) {
        return absl::FailedPreconditionError(absl::StrCat(
            c.kind, ": cell clipping changes nothing (", largest,
            "); the check would not test it"));
      }
    }
    const std::string base = absl::StrCat(dir, "/", c.kind);
    absl::Status s = WriteOnnxModel(base + ".onnx", spec, params);
    if (!s.ok()) return s;
    if (s = WriteFloats(base + ".input.f32", input); !s.ok()) return s;
    if (s = WriteFloats(base + ".expected.f32", *expected); !s.ok()) return s;
    absl::StrAppend(&manifest, c.kind, " ", c.frames, " ", spec.input_dim(),
                    " ", spec.output_dim(), "\n");
    std::printf("%s: %s, %d frames\n", c.kind.c_str(),
                DescribeModel(spec).c_str(), c.frames);
  }
  std::ofstream out(dir + "/manifest.txt");
  out << manifest;
  if (!out.flush()) return absl::DataLossError("cannot write the manifest");
  return absl::OkStatus();
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(argc, argv,
                         "onnx_reference --out=DIR: exported models, inputs "
                         "and asgd's log-posteriors for the onnxruntime test");
  const std::string dir = absl::GetFlag(FLAGS_out);
  if (dir.empty()) {
    std::fprintf(stderr, "onnx_reference: --out is required\n");
    return 2;
  }
  absl::Status s = asgd::Run(dir);
  if (!s.ok()) {
    std::fprintf(stderr, "onnx_reference: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
