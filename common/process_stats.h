// What a process holds, read from the kernel and from malloc: resident
// memory, the bytes malloc has handed out (in use) and keeps free for reuse,
// threads and open file descriptors. Every asgd binary that serves
// /metrics reports them there as asgd_process_* gauges
// (common/metrics_endpoint.h, docs/metrics.md).
//
// Resident memory alone does not tell a leak from a burst: glibc keeps what
// a burst of calls freed inside its arenas (common/freed_memory.h), so the
// resident size stays at the burst's peak. The heap in use does not: it
// falls back once the calls are gone, and grows for good only when the
// process keeps what it allocated (tests/soak_push_pull_test.cc judges a
// server's memory by it).
//
//   ProcessStats s = ReadProcessStats();
//   if (s.heap_in_use_bytes >= 0) ...  // -1: not known here
//
// Thread-safety: ReadProcessStats() is thread-safe (it reads /proc/self and
// calls mallinfo2, which locks each arena in turn).
#ifndef ASGD_COMMON_PROCESS_STATS_H_
#define ASGD_COMMON_PROCESS_STATS_H_

#include <cstdint>

namespace asgd {

// Each figure is -1 where it cannot be read (no /proc, or no glibc).
struct ProcessStats {
  int64_t resident_bytes = -1;     // VmRSS
  int64_t heap_in_use_bytes = -1;  // malloc: handed out and not freed
  int64_t heap_free_bytes = -1;    // malloc: freed, kept for reuse
  // VmHWM, the most that was ever resident: in a worker's summary line
  // (worker/loop/loop.h), not a gauge.
  int64_t peak_resident_bytes = -1;
  int64_t threads = -1;
  int64_t open_fds = -1;
};

ProcessStats ReadProcessStats();

}  // namespace asgd

#endif  // ASGD_COMMON_PROCESS_STATS_H_
