// optimizer_apply_gbench: Google Benchmark micro-benchmark of the apply kernel
// (Optimizer::Apply, one thread) next to memcpy, from cache-resident sizes
// (64 Ki parameters: 256 KiB per buffer) to memory-resident ones (64 Mi: 256
// MiB per buffer). In cache it shows what the loop itself can do (is it
// vectorized?); out of cache it is bounded by memory bandwidth. The
// bytes_per_second counter uses apply_bench's convention: read + written
// bytes, memcpy 2 B per byte copied, SGD 12 B/param, momentum 20 B/param.
// Rates use wall-clock time (UseRealTime), not CPU time, like the other
// benchmarks; Google Benchmark prints them in binary units (1 G/s = 2^30 /s).
//
//   bazel run //bench:optimizer_apply_gbench
//   optimizer_apply_gbench --benchmark_filter=Sgd --benchmark_min_time=0.05
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "step/optimizer.h"

namespace asgd {
namespace {

void ApplyBench(benchmark::State& state, float momentum) {
  const int64_t n = state.range(0);
  OptimizerOptions options;
  options.learning_rate = 0.01f;
  options.momentum = momentum;
  const Optimizer opt = Optimizer::Create(options).value();
  std::vector<float> w(n, 0.01f), v(n, 0.0f), g(n, 1e-6f);
  UpdateContext ctx;
  for (auto _ : state) {
    opt.Apply(w.data(), v.data(), g.data(), n, ctx);
    benchmark::ClobberMemory();
  }
  const int64_t bytes_per_param = momentum > 0 ? 20 : 12;
  state.SetBytesProcessed(state.iterations() * n * bytes_per_param);
  state.SetItemsProcessed(state.iterations() * n);  // parameters
}

void BM_ApplySgd(benchmark::State& state) { ApplyBench(state, 0.0f); }
void BM_ApplyMomentum(benchmark::State& state) { ApplyBench(state, 0.9f); }

void BM_Memcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 2 * sizeof(float));
  state.SetItemsProcessed(state.iterations() * n);  // floats copied
}

BENCHMARK(BM_ApplySgd)
    ->RangeMultiplier(16)
    ->Range(1 << 16, 1 << 26)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ApplyMomentum)
    ->RangeMultiplier(16)
    ->Range(1 << 16, 1 << 26)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Memcpy)
    ->RangeMultiplier(16)
    ->Range(1 << 16, 1 << 26)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace asgd

BENCHMARK_MAIN();
