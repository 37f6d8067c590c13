// Helpers shared by the parameter-server benchmarks in bench/: parsing of
// list flags, a start barrier for timed threads, a description of the machine,
// and the load average (the machine these run on is shared and noisy, so every
// report says how busy it was).
//
// Every benchmark prints a markdown table for people and `csv,<bench>,...`
// lines for scripts (bench/ps_bench_smoke_test.sh parses them). Ratios are
// taken between measurements made by the same process in the same run.
//
// Thread-safety: the free functions are thread-safe; a StartGate is shared by
// the threads it starts.
#ifndef ASGD_BENCH_BENCH_UTIL_H_
#define ASGD_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace asgd::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Parses "64K,1M,16M,256M" (suffixes K, M, G are powers of 1024; no suffix:
// bytes) into byte counts. InvalidArgument names `flag` on bad input.
absl::StatusOr<std::vector<int64_t>> ParseByteList(absl::string_view flag,
                                                   absl::string_view text);

// Parses "1,2,4,8" (positive integers). An entry "N" may be written "cores",
// meaning NumCores().
absl::StatusOr<std::vector<int>> ParseCountList(absl::string_view flag,
                                                absl::string_view text);

// Parses "0.25,0.35" (numbers in (0, 1]).
absl::StatusOr<std::vector<double>> ParseFractionList(absl::string_view flag,
                                                      absl::string_view text);

// Parses "2048x2000,512x40" (pairs of positive integers, their product at
// most 2^28) into (first, second) pairs.
absl::StatusOr<std::vector<std::pair<int, int>>> ParseShapeList(
    absl::string_view flag, absl::string_view text);

// The timing flags of the per-frame layer benchmarks: `batch`, `frames` and
// `rounds` must be >= 1 and `min_seconds` >= 0 (not NaN). InvalidArgument
// names the flags otherwise.
absl::Status CheckFrameTimingFlags(int batch, int frames, int rounds,
                                   double min_seconds);

// Seconds per call of pass(): one untimed call, then the best of `rounds`
// rounds, each repeating pass() for at least `min_seconds`.
template <typename Pass>
double BestSecondsPerPass(Pass pass, int rounds, double min_seconds) {
  pass();  // warm-up: caches, library buffers
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    int64_t passes = 0;
    const Clock::time_point t0 = Clock::now();
    double s = 0;
    do {
      pass();
      ++passes;
      s = SecondsBetween(t0, Clock::now());
    } while (s < min_seconds);
    best = std::min(best, s / passes);
  }
  return best;
}

// "64K", "1M", "256M": the shortest exact power-of-1024 form, else bytes.
std::string FormatBytes(int64_t bytes);

// Online CPUs (std::thread::hardware_concurrency, at least 1).
int NumCores();

// The first "model name" of /proc/cpuinfo, or "unknown".
std::string CpuModel();

// The contents of /proc/loadavg without the newline, or "unknown".
std::string LoadAverage();

// Prints "# machine: ..." and "# load at start: ..." lines.
void PrintMachine(const char* bench);

// Releases a group of threads at once: each calls Arrive(); the last of
// `count` to arrive records the start time and releases all. Returns that
// start time to every caller.
class StartGate {
 public:
  explicit StartGate(int count) : remaining_(count) {}
  Clock::time_point Arrive();

 private:
  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  Clock::time_point start_ ABSL_GUARDED_BY(mu_);
};

// Runs body(t) for t in [0, threads) on `threads` threads released together
// by a StartGate; returns the wall seconds from the release to the end of
// the last.
template <typename Body>
double TimeThreads(int threads, Body body) {
  StartGate gate(threads);
  std::vector<Clock::time_point> ends(threads);
  std::vector<std::thread> pool;
  Clock::time_point start;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const Clock::time_point s = gate.Arrive();
      if (t == 0) start = s;
      body(t);
      ends[t] = Clock::now();
    });
  }
  for (std::thread& th : pool) th.join();
  return SecondsBetween(start, *std::max_element(ends.begin(), ends.end()));
}

// [begin, end) of thread t's slice of n elements (boundaries 16-element
// aligned, as shard boundaries are).
std::pair<int64_t, int64_t> ThreadSlice(int64_t n, int threads, int t);

// memcpy bandwidth in bytes/s, counted as 2 bytes (read + write) per byte
// copied: `threads` threads each copy their ThreadSlice of src to dst, `reps`
// times.
double MemcpyRate(const std::vector<float>& src, std::vector<float>& dst,
                  int threads, int reps);

// User + system CPU seconds used by this process so far (all threads).
// cpu seconds / wall seconds over an interval = cores kept busy.
double ProcessCpuSeconds();

// The same for another process of this machine (from /proc/<pid>/stat, in
// clock ticks of 10 ms); -1 when it cannot be read.
double ProcessCpuSeconds(int pid);

// Touches every page of `data` (so that the first timed pass does not pay for
// page faults) by writing `value` everywhere.
void Fill(float* data, int64_t n, float value);

}  // namespace asgd::bench

#endif  // ASGD_BENCH_BENCH_UTIL_H_
