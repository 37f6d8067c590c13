// A tiny learnable task for tests of the training loops: frames of 4
// features where the label l in {0, 1, 2} lifts feature l, in runs of 5
// frames, plus Gaussian noise; and a small model of every kind for it.
//
//   const Utterances utts = ToyUtterances(/*seed=*/1, /*part=*/0, /*parts=*/2);
//   ModelSpec spec = ToyModel("lstm");
//   auto examples = MakeExamples(spec, &utts, ToyDataOptions());
//
// Thread-safety: pure functions.
#ifndef ASGD_WORKER_DATA_TOY_TASK_H_
#define ASGD_WORKER_DATA_TOY_TASK_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"

namespace asgd {

// `num_utts` utterances of 50 frames (those u with u % parts == part); the
// label of frame t of utterance u is (t / 5 + u) % 3.
inline Utterances ToyUtterances(uint32_t seed, int part = 0, int parts = 1,
                                int num_utts = 20, float noise = 0.3f,
                                float signal = 2.0f) {
  Utterances utts(4);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, noise);
  for (int u = 0; u < num_utts; ++u) {
    std::vector<float> f;
    std::vector<int32_t> l;
    for (int t = 0; t < 50; ++t) {
      const int label = (t / 5 + u) % 3;
      for (int d = 0; d < 4; ++d) {
        f.push_back((d == label ? signal : 0.0f) + normal(rng));
      }
      l.push_back(label);
    }
    if (u % parts == part) utts.Add(f, l);
  }
  return utts;
}

// "dnn", "cnn", "lstm" or "blstm" for the toy task (4 features, 3 classes).
inline ModelSpec ToyModel(const std::string& kind) {
  ModelSpec spec;
  spec.feature_dim = 4;
  spec.num_classes = 3;
  if (kind == "lstm" || kind == "blstm") {
    spec.context = 0;
    LstmLayerSpec l;
    l.cells = 8;
    l.bidirectional = kind == "blstm";
    spec.layers = {LayerSpec::Lstm(l)};
  } else if (kind == "cnn") {
    spec.context = 1;  // 3 x 4 inputs
    ConvLayerSpec c;
    c.filters = 4;
    c.kernel_time = 2;
    c.kernel_freq = 2;
    c.pool_time = 1;
    c.pool_freq = 1;
    spec.layers = {LayerSpec::Conv(c), LayerSpec::Dense(8, Activation::kRelu)};
  } else {
    spec.context = 1;
    spec.layers = {LayerSpec::Dense(8, Activation::kRelu)};
  }
  return spec;
}

// Chunks of 10 frames with 2 frames of context on each side.
inline DataOptions ToyDataOptions() {
  DataOptions d;
  d.chunk_frames = 10;
  d.left_context = 2;
  d.right_context = 2;
  return d;
}

}  // namespace asgd

#endif  // ASGD_WORKER_DATA_TOY_TASK_H_
