#include "common/process_stats.h"

#include <dirent.h>

#include <cstdio>
#include <cstring>

#include "common/freed_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace asgd {
namespace {

// "Threads:" and "VmHWM:" (kB) from /proc/self/status; -1 where unknown.
void ReadStatus(int64_t* threads, int64_t* peak_resident) {
  *threads = *peak_resident = -1;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return;
  char line[256];
  long long value = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "Threads: %lld", &value) == 1) *threads = value;
    if (std::sscanf(line, "VmHWM: %lld kB", &value) == 1) {
      *peak_resident = value * 1024;
    }
  }
  std::fclose(f);
}

// Entries of /proc/self/fd, less the one the listing itself opens.
int64_t OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      ++n;
  }
  closedir(dir);
  return n - 1;
}

}  // namespace

ProcessStats ReadProcessStats() {
  ProcessStats s;
  if (const int64_t resident = ResidentBytes(); resident > 0) {
    s.resident_bytes = resident;
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  const struct mallinfo2 info = mallinfo2();
  // Chunks in the arenas plus the blocks malloc mapped on their own.
  s.heap_in_use_bytes = static_cast<int64_t>(info.uordblks + info.hblkhd);
  s.heap_free_bytes = static_cast<int64_t>(info.fordblks);
#endif
  ReadStatus(&s.threads, &s.peak_resident_bytes);
  s.open_fds = OpenFds();
  return s;
}

}  // namespace asgd
