// Gives memory the process has freed back to the operating system after a
// burst. glibc's malloc keeps what is freed inside its arenas for reuse and
// returns by itself only the top of the main heap, so a server's resident
// memory stays at the peak a burst of calls took long after the calls are
// gone (10,000 PullStreams opened and reset: +217 MB still resident, of which
// malloc_trim gave back 206 MB; docs/reliability.md).
//
// A FreedMemoryReturner, asked now and then (the server asks every few
// seconds from its main loop), trims malloc's arenas (malloc_trim(0)) when
// more than `keep_bytes` lie free in malloc and, since its last trim, the
// process's resident memory grew by more than `keep_bytes` or more than
// `keep_bytes` more were freed (a burst's memory freed after a trim that
// came while it was still held: gRPC frees a backlog of reset calls at its
// own pace). Steady training reuses its memory from step to step, so
// neither grows: it is not trimmed (at most once, for what its first steps
// leave free); a burst is trimmed once it is freed, in as many trims as it
// takes. Without glibc it does nothing.
//
//   FreedMemoryReturner returner(int64_t{64} << 20);
//   ... every few seconds: returner.MaybeReturn();
//
// Thread-safety: one thread calls MaybeReturn(); malloc_trim itself is
// thread-safe (glibc locks each arena while it trims it).
#ifndef ASGD_COMMON_FREED_MEMORY_H_
#define ASGD_COMMON_FREED_MEMORY_H_

#include <cstdint>

namespace asgd {

// Bytes free inside malloc's arenas (freed, kept for reuse); 0 without glibc.
int64_t FreedMemoryHeld();

// The process's resident memory in bytes (VmRSS); 0 where unknown.
int64_t ResidentBytes();

class FreedMemoryReturner {
 public:
  explicit FreedMemoryReturner(int64_t keep_bytes);

  // Trims when more than keep_bytes are free in malloc and, since the last
  // trim (or construction), the resident memory grew by more than
  // keep_bytes or the bytes free in malloc did. Returns the bytes the trim
  // gave back (resident before minus after, at least 0), or 0 when it did
  // not trim.
  int64_t MaybeReturn();

  // Trims done so far.
  int trims() const { return trims_; }

 private:
  const int64_t keep_bytes_;
  int64_t baseline_;       // resident bytes after the last trim
  int64_t free_baseline_;  // bytes free in malloc after the last trim
  int trims_ = 0;
};

}  // namespace asgd

#endif  // ASGD_COMMON_FREED_MEMORY_H_
