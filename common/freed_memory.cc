#include "common/freed_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace asgd {

int64_t FreedMemoryHeld() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.fordblks);
#else
  return 0;
#endif
}

int64_t ResidentBytes() {
  // statm: size, resident, ... in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

FreedMemoryReturner::FreedMemoryReturner(int64_t keep_bytes)
    : keep_bytes_(keep_bytes),
      baseline_(ResidentBytes()),
      free_baseline_(FreedMemoryHeld()) {}

int64_t FreedMemoryReturner::MaybeReturn() {
#if defined(__GLIBC__)
  const int64_t before = ResidentBytes();
  const int64_t free = FreedMemoryHeld();
  // The bytes free in malloc count what a trim gave back too (free chunks
  // whose pages went back), so they grow again only by what was freed since.
  const bool grew = before - baseline_ > keep_bytes_;
  const bool freed = free - free_baseline_ > keep_bytes_;
  if (free <= keep_bytes_ || !(grew || freed)) {
    // Resident memory that fell (freed at the top of the heap, or unmapped)
    // lowers the baseline, so that growth is measured from there.
    baseline_ = std::min(baseline_, before);
    return 0;
  }
  malloc_trim(0);
  ++trims_;
  baseline_ = ResidentBytes();
  free_baseline_ = FreedMemoryHeld();
  return std::max<int64_t>(0, before - baseline_);
#else
  return 0;
#endif
}

}  // namespace asgd
