// PartRunner: runs one job split into a fixed number of parts on a fixed set
// of threads (fork-join), for the worker's replay of a delta pull's updates
// (delta_receiver.h): each part of the slice is replayed by one thread, so a
// pull that carries many updates of a large model costs the replay divided
// by the parts, not the whole of it on the thread reading the stream.
//
//   PartRunner runner(4);                  // 3 helper threads
//   runner.Run([&](int part) { ... });      // part 0 on the caller, 1..3 on
//                                           // the helpers; returns when all
//                                           // four have returned
//
// Parts are given out by index, so a job that splits by part index gives
// each thread a fixed share (no work stealing, no allocation per Run).
//
// Thread-safety: Run() from one thread at a time (the caller owns the job);
// the helpers only run the job between Run()'s start and its return. The
// destructor joins the helpers; no Run() may be in progress.
#ifndef ASGD_WORKER_PS_PART_RUNNER_H_
#define ASGD_WORKER_PS_PART_RUNNER_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace asgd {

class PartRunner {
 public:
  // `parts` >= 1; parts - 1 helper threads are started.
  explicit PartRunner(int parts);
  ~PartRunner();
  PartRunner(const PartRunner&) = delete;
  PartRunner& operator=(const PartRunner&) = delete;

  int parts() const { return parts_; }

  // Calls job(p) once for each p in [0, parts()): part 0 on the calling
  // thread, the others on the helpers. Returns when every call returned.
  void Run(absl::FunctionRef<void(int)> job);

  // [begin, end) of part `p` when `n` items are split into `parts` nearly
  // equal contiguous parts (the first n % parts parts one longer).
  static void Split(int64_t n, int parts, int p, int64_t* begin, int64_t* end);

 private:
  void Helper(int part);

  const int parts_;
  absl::Mutex mu_;
  const absl::FunctionRef<void(int)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // one per Run()
  int running_ ABSL_GUARDED_BY(mu_) = 0;          // helpers not yet done
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> helpers_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_PART_RUNNER_H_
