// sparse_layer_bench: whether storing a pruned layer sparsely
// (model/sparse_layer.h) pays when decoding, per layer shape and density:
// the dense affine product (OpenBLAS: cblas_sgemv for one frame,
// cblas_sgemm for a batch) against SparseAffine on the same weight with all
// but a share --densities of its entries zeroed (at random positions:
// magnitude pruning leaves scattered zeros too), one frame at a time and in
// batches of --batch frames. Also the bytes each stores.
//
//   bazel run -c opt //bench:sparse_layer_bench
//   sparse_layer_bench --layers=512x440,2048x2048 --densities=0.5,0.3,0.1
//
// One OpenBLAS thread. Each time is the best of --rounds after one untimed
// pass, each round at least --min_seconds of repeated passes. Prints a
// markdown table and `csv,sparse_layer,...` lines.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/bench_util.h"
#include "model/sparse_layer.h"

ABSL_FLAG(std::string, layers, "512x440,512x512,2048x2048,2000x2048",
          "Layers as ROWSxCOLS (outputs x inputs), comma-separated.");
ABSL_FLAG(std::string, densities, "0.5,0.3,0.1",
          "Shares of non-zero weights, in (0, 1], comma-separated.");
ABSL_FLAG(int, batch, 1024, "Frames per batch in the batched columns.");
ABSL_FLAG(int, frames, 64, "Frames timed one at a time.");
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

// out = h W^T + bias with OpenBLAS (the dense layer's product).
void DenseAffine(const std::vector<float>& w, const std::vector<float>& bias,
                 int rows, int cols, const float* h, int frames, float* out) {
  for (int f = 0; f < frames; ++f) {
    std::copy(bias.begin(), bias.end(), out + int64_t{f} * rows);
  }
  if (frames == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w.data(),
                cols, h, 1, 1.0f, out, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, frames, rows,
                cols, 1.0f, h, cols, w.data(), cols, 1.0f, out, rows);
  }
}

int Run() {
  auto shapes = bench::ParseShapeList("layers", absl::GetFlag(FLAGS_layers));
  auto densities =
      bench::ParseFractionList("densities", absl::GetFlag(FLAGS_densities));
  const int batch = absl::GetFlag(FLAGS_batch);
  const int frames = absl::GetFlag(FLAGS_frames);
  for (const absl::Status& st :
       {shapes.status(), densities.status(),
        bench::CheckFrameTimingFlags(batch, frames, absl::GetFlag(FLAGS_rounds),
                                     absl::GetFlag(FLAGS_min_seconds))}) {
    if (!st.ok()) {
      std::fprintf(stderr, "sparse_layer_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  openblas_set_num_threads(1);
  bench::PrintMachine("sparse_layer_bench");
  std::printf("\nµs per frame; sparse: model/sparse_layer.h on the pruned weight\n\n");
  std::printf("| layer (out x in) | non-zero | stored bytes, sparse ÷ dense | "
              "one frame: dense (sgemv) | sparse | sparse speed-up | "
              "batch of %d: dense (sgemm) | sparse | sparse speed-up |\n",
              batch);
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  for (const std::pair<int, int>& shape : *shapes) {
    const int rows = shape.first, cols = shape.second;  // lambdas capture these
    const int64_t rows_h = std::max(batch, frames);
    std::vector<float> h(rows_h * cols), bias(rows),
        out(rows_h * int64_t{rows});
    for (float& x : h) x = u(rng);
    for (float& x : bias) x = u(rng);
    for (double density : *densities) {
      std::vector<float> w(int64_t{rows} * cols);
      for (float& x : w) x = coin(rng) < density ? u(rng) : 0.0f;
      const SparseWeight sw = SparseWeight::FromDense(w.data(), rows, cols);
      const double dense_one = BestSeconds([&] {
        for (int f = 0; f < frames; ++f) {
          DenseAffine(w, bias, rows, cols, h.data() + int64_t{f} * cols, 1, out.data());
        }
      }) / frames;
      const double sparse_one = BestSeconds([&] {
        for (int f = 0; f < frames; ++f) {
          SparseAffine(sw, bias.data(), h.data() + int64_t{f} * cols, 1,
                       out.data());
        }
      }) / frames;
      const double dense_batch = BestSeconds([&] {
        DenseAffine(w, bias, rows, cols, h.data(), batch, out.data());
      }) / batch;
      const double sparse_batch = BestSeconds([&] {
        SparseAffine(sw, bias.data(), h.data(), batch, out.data());
      }) / batch;
      const double bytes_ratio =
          static_cast<double>(sw.bytes()) / (4.0 * rows * cols);
      std::printf("| %dx%d | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                  rows, cols, 100.0 * sw.nonzeros() / (double{1} * rows * cols),
                  bytes_ratio, 1e6 * dense_one, 1e6 * sparse_one,
                  dense_one / sparse_one, 1e6 * dense_batch, 1e6 * sparse_batch,
                  dense_batch / sparse_batch);
      std::printf("csv,sparse_layer,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", rows,
                  cols, density, bytes_ratio, 1e6 * dense_one, 1e6 * sparse_one,
                  1e6 * dense_batch, 1e6 * sparse_batch);
    }
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A pruned layer stored sparsely against the dense product (see the "
      "file header).\n  sparse_layer_bench --layers=2048x2048 --densities=0.3");
  absl::ParseCommandLine(argc, argv);
  return asgd::Run();
}
