#include "bench/bench_util.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace asgd::bench {

absl::StatusOr<std::vector<int64_t>> ParseByteList(absl::string_view flag,
                                                   absl::string_view text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    int64_t scale = 1;
    if (!part.empty()) {
      switch (absl::ascii_toupper(part.back())) {
        case 'K':
          scale = int64_t{1} << 10;
          break;
        case 'M':
          scale = int64_t{1} << 20;
          break;
        case 'G':
          scale = int64_t{1} << 30;
          break;
        default:
          break;
      }
      if (scale != 1) part.remove_suffix(1);
    }
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": \"", part,
                       "\" is not a positive size (e.g. 64K, 1M)"));
    }
    out.push_back(v * scale);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseCountList(absl::string_view flag,
                                                absl::string_view text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    int v = 0;
    if (part == "cores") {
      v = NumCores();
    } else if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", part, "\" is not a positive integer"));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

absl::StatusOr<std::vector<double>> ParseFractionList(absl::string_view flag,
                                                      absl::string_view text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    double v = 0;
    if (!absl::SimpleAtod(part, &v) || !(v > 0.0 && v <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", part, "\" is not a number in (0, 1]"));
    }
    out.push_back(v);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

absl::Status CheckFrameTimingFlags(int batch, int frames, int rounds,
                                   double min_seconds) {
  if (batch < 1 || frames < 1 || rounds < 1 || !(min_seconds >= 0)) {
    return absl::InvalidArgumentError(
        "--batch, --frames and --rounds must be >= 1, --min_seconds >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<int, int>>> ParseShapeList(
    absl::string_view flag, absl::string_view text) {
  std::vector<std::pair<int, int>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> sides = absl::StrSplit(part, 'x');
    int a = 0, b = 0;
    if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &a) ||
        !absl::SimpleAtoi(sides[1], &b) || a < 1 || b < 1 ||
        int64_t{a} * b > (int64_t{1} << 28)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": \"", part,
          "\" is not AxB with positive A, B and A*B <= 2^28"));
    }
    out.emplace_back(a, b);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"G", "M", "K"};
  static constexpr int kShifts[] = {30, 20, 10};
  for (int i = 0; i < 3; ++i) {
    const int64_t unit = int64_t{1} << kShifts[i];
    if (bytes >= unit && bytes % unit == 0) {
      return absl::StrCat(bytes / unit, kUnits[i]);
    }
  }
  return absl::StrCat(bytes);
}

int NumCores() { return std::max(1u, std::thread::hardware_concurrency()); }

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  if (!std::getline(in, line)) return "unknown";
  return std::string(absl::StripAsciiWhitespace(line));
}

void PrintMachine(const char* bench) {
  std::printf("# %s: machine: %d cores, %s, no GPU used\n", bench, NumCores(),
              CpuModel().c_str());
  std::printf("# %s: load average at start: %s\n", bench,
              LoadAverage().c_str());
}

Clock::time_point StartGate::Arrive() {
  absl::MutexLock lock(&mu_);
  if (--remaining_ == 0) start_ = Clock::now();
  auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return remaining_ <= 0;
  };
  mu_.Await(absl::Condition(&released));
  return start_;
}

std::pair<int64_t, int64_t> ThreadSlice(int64_t n, int threads, int t) {
  auto bound = [&](int k) {
    return k == threads ? n : (n / threads * k) / 16 * 16;
  };
  return {bound(t), bound(t + 1)};
}

double MemcpyRate(const std::vector<float>& src, std::vector<float>& dst,
                  int threads, int reps) {
  const int64_t n = src.size();
  const double s = TimeThreads(threads, [&](int t) {
    const auto [b, e] = ThreadSlice(n, threads, t);
    for (int r = 0; r < reps; ++r) {
      std::memcpy(dst.data() + b, src.data() + b, (e - b) * sizeof(float));
    }
  });
  return 2.0 * 4.0 * n * reps / s;
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double ProcessCpuSeconds(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // Fields after the command (in parentheses, which may hold spaces):
  // state is field 3; utime and stime are fields 14 and 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
  double utime, stime;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return -1;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void Fill(float* data, int64_t n, float value) { std::fill_n(data, n, value); }

}  // namespace asgd::bench
