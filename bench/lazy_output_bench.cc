// lazy_output_bench: what lazy output evaluation (model/lazy_output.h) saves
// against the full output layer, per output layer shape and share of active
// pdfs, in the two ways a decoder evaluates a model:
//   one frame at a time  (online decoding): the full layer is a
//                        matrix-vector product (cblas_sgemv) that reads the
//                        whole weight per frame; the lazy one a dot product
//                        per active pdf;
//   a batch of frames    (--batch, offline decoding): the full layer is one
//                        matrix-matrix product (cblas_sgemm) per batch.
// Active pdfs are drawn at random per frame (round(fraction x classes) of
// them, distinct): a decoder's active sets change slowly from frame to
// frame, so their weight rows stay in cache longer than these do; random
// sets are the lazy path's harder case.
//
//   bazel run -c opt //bench:lazy_output_bench
//   lazy_output_bench --layers=512x40,2048x2000,2048x8000 --fractions=0.25,0.35
//
// One OpenBLAS thread (a decoder's core). Each time is the best of --rounds
// after one untimed pass, each round at least --min_seconds of repeated
// passes. Prints a markdown
// table and `csv,lazy_output,...` lines.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/bench_util.h"
#include "model/lazy_output.h"

ABSL_FLAG(std::string, layers, "512x40,2048x2000,2048x8000",
          "Output layers as INxCLASSES (inputs x pdfs), comma-separated.");
ABSL_FLAG(std::string, fractions, "0.25,0.35",
          "Shares of the pdfs active per frame, in (0, 1], comma-separated.");
ABSL_FLAG(int, batch, 1024, "Frames per batch in the batched rows.");
ABSL_FLAG(int, frames, 256, "Frames timed in the one-frame-at-a-time rows.");
ABSL_FLAG(double, min_seconds, 0.2, "Shortest timed round.");
ABSL_FLAG(int, rounds, 3, "Rounds per measurement; the best is shown.");

extern "C" void openblas_set_num_threads(int);

namespace asgd {
namespace {

using bench::Clock;

// Seconds per pass, by the --rounds and --min_seconds flags.
template <typename Pass>
double BestSeconds(Pass pass) {
  return bench::BestSecondsPerPass(pass, absl::GetFlag(FLAGS_rounds),
                                   absl::GetFlag(FLAGS_min_seconds));
}

ActiveOutputs RandomActive(int64_t frames, int classes, double fraction,
                           std::mt19937& rng) {
  const int n = std::max(1, static_cast<int>(fraction * classes + 0.5));
  std::vector<int32_t> all(classes);
  std::iota(all.begin(), all.end(), 0);
  ActiveOutputs a;
  for (int64_t f = 0; f < frames; ++f) {
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int32_t> pdfs(all.begin(), all.begin() + n);
    std::sort(pdfs.begin(), pdfs.end());
    a.AddFrame(pdfs);
  }
  return a;
}

int Run() {
  auto shapes = bench::ParseShapeList("layers", absl::GetFlag(FLAGS_layers));
  auto fractions =
      bench::ParseFractionList("fractions", absl::GetFlag(FLAGS_fractions));
  const int batch = absl::GetFlag(FLAGS_batch);
  const int frames = absl::GetFlag(FLAGS_frames);
  for (const absl::Status& st :
       {shapes.status(), fractions.status(),
        bench::CheckFrameTimingFlags(batch, frames, absl::GetFlag(FLAGS_rounds),
                                     absl::GetFlag(FLAGS_min_seconds))}) {
    if (!st.ok()) {
      std::fprintf(stderr, "lazy_output_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  openblas_set_num_threads(1);
  bench::PrintMachine("lazy_output_bench");
  std::printf("\nµs per frame; lazy: dot products of the active pdfs only\n\n");
  std::printf("| layer (in x pdfs) | active | one frame: full (sgemv) | lazy | "
              "lazy speed-up | batch of %d: full (sgemm) | lazy | lazy speed-up |\n",
              batch);
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(1);
  for (const std::pair<int, int>& shape : *shapes) {
    const int in = shape.first, classes = shape.second;  // lambdas capture these
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    std::vector<float> params(int64_t{classes} * in + classes);
    for (float& x : params) x = u(rng);
    OutputLayerView layer{params.data(), params.data() + int64_t{classes} * in,
                          in, classes};
    const int64_t rows = std::max(batch, frames);
    std::vector<float> h(rows * in);
    for (float& x : h) x = u(rng);
    std::vector<float> full(int64_t{batch} * classes);
    for (double fraction : *fractions) {
      const ActiveOutputs active = RandomActive(rows, classes, fraction, rng);
      std::vector<float> lazy(active.pdfs.size());
      // One frame at a time: `frames` frames per pass.
      const double full_one = BestSeconds([&] {
        for (int f = 0; f < frames; ++f) {
          FullLogits(layer, h.data() + int64_t{f} * in, 1, full.data());
        }
      }) / frames;
      ActiveOutputs first;  // the first `frames` frames of `active`
      first.begin.assign(active.begin.begin(), active.begin.begin() + frames + 1);
      first.pdfs.assign(active.pdfs.begin(), active.pdfs.begin() + first.begin.back());
      const double lazy_one =
          BestSeconds([&] { LazyLogits(layer, h.data(), first, lazy.data()); }) /
          frames;
      ActiveOutputs batched;
      batched.begin.assign(active.begin.begin(), active.begin.begin() + batch + 1);
      batched.pdfs.assign(active.pdfs.begin(),
                          active.pdfs.begin() + batched.begin.back());
      const double full_batch =
          BestSeconds([&] { FullLogits(layer, h.data(), batch, full.data()); }) /
          batch;
      const double lazy_batch =
          BestSeconds([&] { LazyLogits(layer, h.data(), batched, lazy.data()); }) /
          batch;
      std::printf("| %dx%d | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                  in, classes, 100 * fraction, 1e6 * full_one,
                  1e6 * lazy_one, full_one / lazy_one, 1e6 * full_batch,
                  1e6 * lazy_batch, full_batch / lazy_batch);
      std::printf("csv,lazy_output,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f\n", in,
                  classes, fraction, 1e6 * full_one, 1e6 * lazy_one,
                  1e6 * full_batch, 1e6 * lazy_batch);
    }
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Lazy output evaluation against the full output layer (see the file "
      "header).\n  lazy_output_bench --layers=2048x2000 --fractions=0.3");
  absl::ParseCommandLine(argc, argv);
  return asgd::Run();
}
