// kaldi_read_bench: reading throughput of Kaldi feature archives, plain (FM)
// against compressed (CM, what Kaldi's feature recipes write), and the peak
// resident memory of a streaming pass over an archive several times larger
// than an explicit memory budget.
//
//   bazel run -c opt //bench:kaldi_read_bench -- --dir=/tmp/asgd-kaldi-bench
//   kaldi_read_bench --throughput_mb=256 --stream_mb=1536 --budget_mb=200
//
// Throughput: one generated corpus (speech-like 40-dim features, 200-800
// frames per utterance, --throughput_mb of FM data) written as FM and as
// compressed archives with scp files and pdf alignments. Each is read
//   * sequentially (SequentialArchiveReader over the whole ark), and
//   * through the training source (KaldiDataSource: scp offsets, a random
//     utterance order, a shuffle buffer, alignments joined, no CMVN),
// with the page cache warm (after a read) and cold (the archive's pages
// dropped with posix_fadvise(DONTNEED) before each pass; this affects only the
// bench's own files). Each row is the best of --repeats passes; the ratio
// CM/FM is taken within this run.
//
// Streaming: an FM archive of --stream_mb (with alignments) is read once by a
// KaldiDataSource whose shuffle buffer may hold budget/2 bytes and whose
// labels may take budget/8 bytes in memory (the rest spills to a temporary
// file). The process's peak RSS (VmHWM from /proc/self/status, reset
// through /proc/self/clear_refs after generating the data) must stay within
// --budget_mb; with --limit_as the pass also runs under RLIMIT_AS = budget +
// --as_slack_mb (address space: code, libraries and thread stacks count
// there). The bench exits 1 when the peak exceeds the budget. The files it
// generates are removed at the end (--keep keeps them).
//
// Output: markdown tables and `csv,kaldi_read,...` lines.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "kaldi/archive_reader.h"
#include "kaldi/archive_writer.h"
#include "kaldi/data_source.h"

ABSL_FLAG(std::string, dir, "/tmp/asgd-kaldi-bench",
          "Where the archives are generated (removed at the end unless "
          "--keep).");
ABSL_FLAG(int64_t, throughput_mb, 256,
          "FM data of the throughput corpus, in MiB (0: skip).");
ABSL_FLAG(int, repeats, 3, "Passes per throughput row (the best is kept).");
ABSL_FLAG(int64_t, stream_mb, 1536,
          "FM data of the streaming archive, in MiB (0: skip).");
ABSL_FLAG(int64_t, budget_mb, 200, "Memory budget of the streaming pass.");
ABSL_FLAG(
    bool, limit_as, false,
    "Also run the streaming pass under RLIMIT_AS = budget + as_slack_mb.");
ABSL_FLAG(int64_t, as_slack_mb, 64,
          "Address space allowed beyond the budget with --limit_as.");
ABSL_FLAG(bool, keep, false, "Keep the generated files.");

namespace asgd::bench {
namespace {

using kaldi::ArchiveWriter;
using kaldi::ArchiveWriterOptions;
using kaldi::KaldiDataOptions;
using kaldi::KaldiDataSource;
using kaldi::KaldiUtterance;
using kaldi::Matrix;
using kaldi::MatrixFormat;

constexpr int kDim = 40;

void Fail(const absl::Status& s) {
  std::fprintf(stderr, "kaldi_read_bench: error: %s\n", s.ToString().c_str());
  std::exit(2);
}

// Speech-like features: a slowly varying log-mel-like envelope per utterance
// plus noise, 200-800 frames.
class FeatureGenerator {
 public:
  explicit FeatureGenerator(uint64_t seed) : rng_(seed) {}
  void Next(Matrix* m, std::vector<int32_t>* labels) {
    const int frames = std::uniform_int_distribution<int>(200, 800)(rng_);
    m->Resize(frames, kDim);
    labels->resize(frames);
    const float offset = std::normal_distribution<float>(0, 2)(rng_);
    for (int t = 0; t < frames; ++t) {
      for (int d = 0; d < kDim; ++d) {
        m->at(t, d) = offset + 8.0f - 0.1f * d +
                      3.0f * std::sin(0.05f * t + 0.3f * d) + noise_(rng_);
      }
      (*labels)[t] = (t / 7 + d_shift_) % 2000;
    }
    ++d_shift_;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<float> noise_{0.0f, 1.0f};
  int d_shift_ = 0;
};

struct Corpus {
  int64_t utterances = 0;
  int64_t frames = 0;
};

// Writes `fm_bytes` of features under dir/<name>/ for every format given
// (feats.ark, feats.scp) and dir/pdf.ark.
Corpus Generate(
    const std::string& dir, int64_t fm_bytes,
    const std::vector<std::pair<std::string, MatrixFormat>>& formats) {
  std::vector<std::unique_ptr<ArchiveWriter>> writers;
  for (const auto& [name, format] : formats) {
    const std::string sub = dir + "/" + name;
    ::mkdir(sub.c_str(), 0755);
    ArchiveWriterOptions o;
    o.ark_path = sub + "/feats.ark";
    o.scp_path = sub + "/feats.scp";
    o.matrix_format = format;
    auto w = ArchiveWriter::Create(o);
    if (!w.ok()) Fail(w.status());
    writers.push_back(*std::move(w));
  }
  ArchiveWriterOptions ali;
  ali.ark_path = dir + "/pdf.ark";
  auto ali_writer = ArchiveWriter::Create(ali);
  if (!ali_writer.ok()) Fail(ali_writer.status());
  FeatureGenerator gen(1);
  Corpus c;
  Matrix m;
  std::vector<int32_t> labels;
  while (c.frames * kDim * 4 < fm_bytes) {
    gen.Next(&m, &labels);
    char key[32];
    std::snprintf(key, sizeof(key), "utt%09lld",
                  static_cast<long long>(c.utterances));
    for (auto& w : writers) {
      absl::Status s = w->WriteMatrix(key, m);
      if (!s.ok()) Fail(s);
    }
    absl::Status s = (*ali_writer)->WriteInt32Vector(key, labels);
    if (!s.ok()) Fail(s);
    ++c.utterances;
    c.frames += m.rows;
  }
  for (auto& w : writers) {
    absl::Status s = w->Close();
    if (!s.ok()) Fail(s);
  }
  absl::Status s = (*ali_writer)->Close();
  if (!s.ok()) Fail(s);
  return c;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

void DropFromCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Frames read by one pass.
int64_t SequentialPass(const std::string& ark) {
  auto reader = kaldi::SequentialArchiveReader::Open(ark);
  if (!reader.ok()) Fail(reader.status());
  Matrix m;
  int64_t frames = 0;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next();
    if (!more.ok()) Fail(more.status());
    if (!*more) break;
    absl::Status s = (*reader)->ReadMatrix(&m);
    if (!s.ok()) Fail(s);
    frames += m.rows;
  }
  return frames;
}

KaldiDataOptions SourceOptions(const std::string& data_dir,
                               const std::string& dir) {
  KaldiDataOptions o;
  o.data_dir = data_dir;
  o.alignments = dir + "/pdf.ark";
  o.cmvn = kaldi::CmvnMode::kOff;
  o.shuffle = true;
  o.temp_dir = dir;
  return o;
}

int64_t SourcePass(KaldiDataSource* source, uint64_t epoch) {
  source->StartEpoch(epoch);
  KaldiUtterance u;
  int64_t frames = 0;
  while (true) {
    absl::StatusOr<bool> more = source->Next(&u);
    if (!more.ok()) Fail(more.status());
    if (!*more) break;
    frames += u.num_frames();
  }
  return frames;
}

struct Row {
  std::string format, reader, cache;
  double frames_per_s = 0;
  double mb_per_s = 0;  // archive bytes
};

void Throughput(const std::string& dir, int64_t mb, int repeats) {
  const std::vector<std::pair<std::string, MatrixFormat>> formats = {
      {"fm", MatrixFormat::kFloat}, {"cm", MatrixFormat::kCompressedAuto}};
  const Clock::time_point t0 = Clock::now();
  const Corpus c = Generate(dir, mb << 20, formats);
  std::printf(
      "\n## Throughput: %lld utterances, %lld frames x %d dims (%.1f h "
      "at 10 ms), generated in %.1f s\n\n",
      static_cast<long long>(c.utterances), static_cast<long long>(c.frames),
      kDim, c.frames / 360000.0, SecondsBetween(t0, Clock::now()));
  std::vector<Row> rows;
  for (const auto& [name, format] : formats) {
    const std::string ark = dir + "/" + name + "/feats.ark";
    const int64_t bytes = FileSize(ark);
    std::printf("%s archive: %.1f MiB (%.2f bytes per value)\n", name.c_str(),
                bytes / 1048576.0, double(bytes) / (c.frames * kDim));
    auto source = KaldiDataSource::Create(SourceOptions(dir + "/" + name, dir));
    if (!source.ok()) Fail(source.status());
    for (const char* cache : {"warm", "cold"}) {
      for (const char* reader : {"sequential", "source"}) {
        const bool cold = std::string(cache) == "cold";
        const bool sequential = std::string(reader) == "sequential";
        if (!cold) {  // warm the cache
          sequential ? SequentialPass(ark) : SourcePass(source->get(), 99);
        }
        double best = 1e30;
        for (int r = 0; r < repeats; ++r) {
          if (cold) DropFromCache(ark);
          const Clock::time_point start = Clock::now();
          const int64_t frames =
              sequential ? SequentialPass(ark) : SourcePass(source->get(), r);
          const double s = SecondsBetween(start, Clock::now());
          if (frames != c.frames) {
            std::fprintf(stderr, "kaldi_read_bench: read %lld of %lld frames\n",
                         static_cast<long long>(frames),
                         static_cast<long long>(c.frames));
            std::exit(2);
          }
          best = std::min(best, s);
        }
        rows.push_back(
            {name, reader, cache, c.frames / best, bytes / 1048576.0 / best});
      }
    }
  }
  std::printf(
      "\n| format | reader | page cache | frames/s | archive MiB/s | "
      "frames/s vs FM |\n|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    double fm = 0;
    for (const Row& o : rows) {
      if (o.format == "fm" && o.reader == r.reader && o.cache == r.cache) {
        fm = o.frames_per_s;
      }
    }
    std::printf("| %s | %s | %s | %.0f | %.0f | %.2f |\n", r.format.c_str(),
                r.reader.c_str(), r.cache.c_str(), r.frames_per_s, r.mb_per_s,
                r.frames_per_s / fm);
  }
  for (const Row& r : rows) {
    std::printf("csv,kaldi_read,throughput,%s,%s,%s,%.0f,%.1f\n",
                r.format.c_str(), r.reader.c_str(), r.cache.c_str(),
                r.frames_per_s, r.mb_per_s);
  }
}

// VmHWM or VmRSS of this process in bytes, from /proc/self/status.
int64_t ProcStatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) {
      return std::stoll(line.substr(std::strlen(field) + 1)) * 1024;
    }
  }
  return -1;
}

bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.close();
  return !out.fail();
}

// Returns the process exit code: 1 when the peak RSS exceeds the budget.
int Stream(const std::string& dir, int64_t mb, int64_t budget_mb, bool limit_as,
           int64_t as_slack_mb) {
  const std::string sub = dir + "/stream";
  ::mkdir(sub.c_str(), 0755);
  const Clock::time_point t0 = Clock::now();
  const Corpus c = Generate(sub, mb << 20, {{"fm", MatrixFormat::kFloat}});
  const std::string ark = sub + "/fm/feats.ark";
  const int64_t budget = budget_mb << 20;
  std::printf(
      "\n## Streaming: %.1f MiB FM archive (%lld utterances, %lld "
      "frames), budget %lld MiB (%.1fx smaller), generated in %.1f s\n\n",
      FileSize(ark) / 1048576.0, static_cast<long long>(c.utterances),
      static_cast<long long>(c.frames), static_cast<long long>(budget_mb),
      double(FileSize(ark)) / budget, SecondsBetween(t0, Clock::now()));
  DropFromCache(ark);
  if (!ResetPeakRss()) {
    std::printf(
        "# cannot reset the peak RSS (/proc/self/clear_refs): the "
        "figure below includes the generation\n");
  }
  if (limit_as) {
    const rlim_t limit = static_cast<rlim_t>((budget_mb + as_slack_mb) << 20);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) {
      std::perror("setrlimit");
      return 2;
    }
  }
  const int64_t rss_start = ProcStatusBytes("VmRSS:");
  KaldiDataOptions o = SourceOptions(sub + "/fm", sub);
  o.shuffle_buffer_utterances = 1 << 20;
  o.shuffle_buffer_bytes = budget / 2;
  o.max_label_memory_bytes = budget / 8;
  const Clock::time_point start = Clock::now();
  int64_t frames = 0;
  kaldi::KaldiDataStats stats;
  {
    auto source = KaldiDataSource::Create(o);
    if (!source.ok()) Fail(source.status());
    frames = SourcePass(source->get(), 0);
    stats = (*source)->stats();
  }
  const double seconds = SecondsBetween(start, Clock::now());
  const int64_t peak = ProcStatusBytes("VmHWM:");
  const bool ok = frames == c.frames && peak >= 0 && peak <= budget;
  std::printf(
      "| archive MiB | budget MiB | RSS before MiB | peak RSS MiB | shuffle "
      "buffer peak MiB (utts) | labels in memory MiB | labels spilled | "
      "RLIMIT_AS MiB | frames/s |\n|---|---|---|---|---|---|---|---|---|\n");
  std::printf(
      "| %.0f | %lld | %.1f | %.1f | %.1f (%lld) | %.1f | %s | %s | %.0f |\n",
      FileSize(ark) / 1048576.0, static_cast<long long>(budget_mb),
      rss_start / 1048576.0, peak / 1048576.0,
      stats.peak_buffer_bytes / 1048576.0,
      static_cast<long long>(stats.peak_buffer_utterances),
      stats.label_memory_bytes / 1048576.0, stats.labels_spilled ? "yes" : "no",
      limit_as ? absl::StrCat(budget_mb + as_slack_mb).c_str() : "none",
      frames / seconds);
  std::printf("csv,kaldi_read,stream,%lld,%lld,%lld,%lld,%d,%.0f\n",
              static_cast<long long>(FileSize(ark)),
              static_cast<long long>(budget), static_cast<long long>(peak),
              static_cast<long long>(stats.peak_buffer_bytes),
              stats.labels_spilled ? 1 : 0, frames / seconds);
  std::printf(
      "\nstreaming: read %lld of %lld frames; peak RSS %.1f MiB %s the "
      "%lld MiB budget\n",
      static_cast<long long>(frames), static_cast<long long>(c.frames),
      peak / 1048576.0, peak <= budget ? "within" : "EXCEEDS",
      static_cast<long long>(budget_mb));
  return ok ? 0 : 1;
}

// Removes what Generate() wrote under `dir` (and nothing else).
void RemoveGenerated(const std::string& dir) {
  for (const std::string& sub :
       std::vector<std::string>{dir, dir + "/stream"}) {
    for (const char* name : {"fm", "cm"}) {
      for (const char* file : {"feats.ark", "feats.scp"}) {
        std::remove(absl::StrCat(sub, "/", name, "/", file).c_str());
      }
      ::rmdir(absl::StrCat(sub, "/", name).c_str());
    }
    std::remove((sub + "/pdf.ark").c_str());
  }
  ::rmdir((dir + "/stream").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace asgd::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Kaldi archive reading: FM vs compressed throughput, and the peak RSS "
      "of a streaming pass over an archive larger than a memory budget.");
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::perror(dir.c_str());
    return 2;
  }
  asgd::bench::PrintMachine("kaldi_read_bench");
  if (absl::GetFlag(FLAGS_throughput_mb) > 0) {
    asgd::bench::Throughput(dir, absl::GetFlag(FLAGS_throughput_mb),
                            std::max(1, absl::GetFlag(FLAGS_repeats)));
  }
  int rc = 0;
  if (absl::GetFlag(FLAGS_stream_mb) > 0) {
    rc = asgd::bench::Stream(
        dir, absl::GetFlag(FLAGS_stream_mb), absl::GetFlag(FLAGS_budget_mb),
        absl::GetFlag(FLAGS_limit_as), absl::GetFlag(FLAGS_as_slack_mb));
  }
  if (!absl::GetFlag(FLAGS_keep)) asgd::bench::RemoveGenerated(dir);
  return rc;
}
