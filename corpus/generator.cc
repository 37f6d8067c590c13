#include "corpus/generator.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "corpus/corpus_io.h"
#include "corpus/features.h"
#include "corpus/phone_set.h"
#include "corpus/sentences.h"
#include "corpus/synth.h"

namespace asgd::corpus {
namespace {

// Seeds the shuffle that picks the held-out sentences; constant so that the
// held-out set does not depend on --seed.
constexpr uint64_t kHeldoutShuffleSeed = 0x68656c646f7574;  // "heldout"
constexpr size_t kMaxChildMessageBytes = 4000;
constexpr double kPi = 3.14159265358979323846;

enum class Split { kTrain = 0, kHeldout = 1 };

absl::string_view SplitName(Split split) {
  return split == Split::kTrain ? "train" : "heldout";
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A deterministic random stream. std::mt19937_64's output is fixed by the
// C++ standard; the conversions to uniform and Gaussian values are done here
// (not with std:: distributions, whose results vary between libraries), so a
// seed gives the same corpus everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  Rng(uint64_t seed, uint64_t stream)
      : engine_(SplitMix64(seed ^ SplitMix64(stream))) {}

  uint64_t Next() { return engine_(); }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform in [0, n), n > 0 (multiply-shift, bias below 2^-64 * n).
  uint64_t Below(uint64_t n) {
    return absl::Uint128High64(absl::uint128(engine_()) * n);
  }
  // A pair of independent standard normal values (Box-Muller).
  std::pair<double, double> GaussianPair() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * kPi * u2;
    return {r * std::cos(angle), r * std::sin(angle)};
  }

 private:
  std::mt19937_64 engine_;
};

template <typename T>
void Shuffle(Rng& rng, std::vector<T>* values) {
  for (size_t i = values->size(); i > 1; --i) {
    std::swap((*values)[i - 1], (*values)[rng.Below(i)]);
  }
}

// Everything needed to make one utterance, drawn in the parent.
struct UtterancePlan {
  std::string id;  // "train-000042"
  const std::string* text = nullptr;
  std::string voice;    // a name in kVoiceNames
  int voice_index = 0;  // its position there
  float duration_stretch = 1;
  float snr_db = 0;  // used when add_noise
  uint64_t noise_seed = 0;
  unsigned excitation_seed = 0;  // flite's rand() (see Synthesize)
};

absl::Status ValidateOptions(const GeneratorOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(what);
  };
  if (o.out_dir.empty()) return bad("no output directory given");
  if (o.num_train < 1) {
    return bad(absl::StrCat("num_train must be at least 1, got ", o.num_train));
  }
  if (o.num_heldout < 0) {
    return bad(absl::StrCat("num_heldout must be >= 0, got ", o.num_heldout));
  }
  if (o.voices.empty()) return bad("no voice given");
  for (size_t i = 0; i < o.voices.size(); ++i) {
    ASGD_RETURN_IF_ERROR(VoiceIndex(o.voices[i]).status());
    for (size_t j = 0; j < i; ++j) {
      if (o.voices[i] == o.voices[j]) {
        return bad(absl::StrCat("voice \"", o.voices[i], "\" given twice"));
      }
    }
  }
  if (!(o.speed_min >= 0.25f && o.speed_min <= o.speed_max &&
        o.speed_max <= 4.0f)) {
    return bad(absl::StrCat("need 0.25 <= speed_min <= speed_max <= 4, got ",
                            o.speed_min, " and ", o.speed_max));
  }
  if (o.add_noise &&
      !(std::isfinite(o.snr_db_min) && std::isfinite(o.snr_db_max) &&
        o.snr_db_min <= o.snr_db_max)) {
    return bad(absl::StrCat("need finite snr_db_min <= snr_db_max, got ",
                            o.snr_db_min, " and ", o.snr_db_max));
  }
  return absl::OkStatus();
}

// mkdir -p.
absl::Status MakeDirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      const int err = errno;
      std::string message = absl::StrCat("cannot create directory ", prefix,
                                         ": ", std::strerror(err));
      if (err == EACCES || err == EPERM || err == EROFS) {
        return absl::PermissionDeniedError(message);
      }
      return absl::FailedPreconditionError(message);
    }
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a directory"));
  }
  return absl::OkStatus();
}

// Creates `out_dir`, checks it is writable and removes an old corpus.txt.
absl::Status PrepareOutputDir(const std::string& out_dir) {
  ASGD_RETURN_IF_ERROR(MakeDirs(out_dir));
  const std::string probe = absl::StrCat(out_dir, "/.make_corpus_probe");
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write in output directory ", out_dir, ": ",
                     std::strerror(errno)));
  }
  close(fd);
  unlink(probe.c_str());
  const std::string metadata = absl::StrCat(out_dir, "/corpus.txt");
  if (unlink(metadata.c_str()) != 0 && errno != ENOENT) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot remove the old ", metadata, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Writes `contents` to `path` through a temporary file and a rename.
absl::Status WriteTextFile(const std::string& path,
                           absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  const bool written =
      std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  if (std::fclose(file) != 0 || !written ||
      std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

std::string PartName(Split split, int part, absl::string_view extension) {
  return absl::StrFormat("%s-%02d.%s", SplitName(split), part, extension);
}

// Draws the plans of `count` utterances of `split`, reading `sentences` in
// order (cyclically).
absl::StatusOr<std::vector<UtterancePlan>> PlanSplit(
    const GeneratorOptions& options, Split split,
    const std::vector<const std::string*>& sentences, int count) {
  std::vector<UtterancePlan> plans(count);
  for (int i = 0; i < count; ++i) {
    UtterancePlan& plan = plans[i];
    Rng rng(options.seed,
            (static_cast<uint64_t>(split) << 32) | static_cast<uint64_t>(i));
    plan.id = absl::StrFormat("%s-%06d", SplitName(split), i);
    plan.text = sentences[i % sentences.size()];
    plan.voice = options.voices[rng.Below(options.voices.size())];
    ASGD_ASSIGN_OR_RETURN(plan.voice_index, VoiceIndex(plan.voice));
    plan.duration_stretch =
        static_cast<float>(rng.Uniform(options.speed_min, options.speed_max));
    plan.snr_db =
        static_cast<float>(rng.Uniform(options.snr_db_min, options.snr_db_max));
    plan.noise_seed = rng.Next();
    plan.excitation_seed = static_cast<unsigned>(rng.Next() >> 33);
  }
  return plans;
}

struct Plan {
  std::vector<UtterancePlan> train;
  std::vector<UtterancePlan> heldout;
};

absl::StatusOr<Plan> MakePlan(const GeneratorOptions& options,
                              const std::vector<std::string>& clauses) {
  if (static_cast<size_t>(options.num_heldout) >= clauses.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_heldout (", options.num_heldout,
                     ") must be below the ", clauses.size(), " sentences of ",
                     options.text_dir, ", leaving some for training"));
  }
  std::vector<const std::string*> order;
  for (const std::string& clause : clauses) order.push_back(&clause);
  Rng heldout_rng(kHeldoutShuffleSeed);
  Shuffle(heldout_rng, &order);
  std::vector<const std::string*> heldout(order.begin(),
                                          order.begin() + options.num_heldout);
  std::vector<const std::string*> train(order.begin() + options.num_heldout,
                                        order.end());
  Rng train_rng(options.seed);
  Shuffle(train_rng, &train);

  Plan plan;
  ASGD_ASSIGN_OR_RETURN(
      plan.train, PlanSplit(options, Split::kTrain, train, options.num_train));
  ASGD_ASSIGN_OR_RETURN(plan.heldout, PlanSplit(options, Split::kHeldout,
                                                heldout, options.num_heldout));
  return plan;
}

// The slice [begin, end) of `count` items that job `job` of `jobs` makes.
std::pair<size_t, size_t> JobSlice(size_t count, int job, int jobs) {
  return {count * job / jobs, count * (job + 1) / jobs};
}

// Adds white Gaussian noise at `snr_db` below the signal's mean power.
void AddNoise(float snr_db, uint64_t seed, std::vector<float>* samples) {
  double power = 0;
  for (float x : *samples) power += static_cast<double>(x) * x;
  power /= std::max<size_t>(samples->size(), 1);
  if (power <= 0) return;
  const double stddev = std::sqrt(power / std::pow(10.0, snr_db / 10.0));
  Rng rng(seed);
  for (size_t i = 0; i < samples->size(); i += 2) {
    const auto [a, b] = rng.GaussianPair();
    (*samples)[i] += static_cast<float>(stddev * a);
    if (i + 1 < samples->size()) {
      (*samples)[i + 1] += static_cast<float>(stddev * b);
    }
  }
}

// Per-process state of a job: one Synthesizer and one feature extractor.
class JobRunner {
 public:
  JobRunner(const GeneratorOptions& options, int job, int jobs,
            std::unique_ptr<Synthesizer> synth,
            std::unique_ptr<FilterbankExtractor> extractor)
      : options_(options),
        job_(job),
        jobs_(jobs),
        synth_(std::move(synth)),
        extractor_(std::move(extractor)) {}

  absl::Status Run(const Plan& plan) {
    const auto [train_begin, train_end] =
        JobSlice(plan.train.size(), job_, jobs_);
    const auto [heldout_begin, heldout_end] =
        JobSlice(plan.heldout.size(), job_, jobs_);
    total_ = (train_end - train_begin) + (heldout_end - heldout_begin);
    ASGD_RETURN_IF_ERROR(
        RunSplit(Split::kTrain, plan.train, train_begin, train_end));
    return RunSplit(Split::kHeldout, plan.heldout, heldout_begin, heldout_end);
  }

 private:
  absl::Status RunSplit(Split split, const std::vector<UtterancePlan>& plans,
                        size_t begin, size_t end) {
    std::vector<Utterance> utterances;
    std::string text;
    for (size_t i = begin; i < end; ++i) {
      ASGD_ASSIGN_OR_RETURN(Utterance utterance, Make(plans[i]));
      utterances.push_back(std::move(utterance));
      absl::StrAppend(&text, plans[i].id, " ", plans[i].voice, " ",
                      *plans[i].text, "\n");
      ReportProgress();
    }
    const std::string base = absl::StrCat(options_.out_dir, "/");
    ASGD_RETURN_IF_ERROR(WriteUtteranceFile(base + PartName(split, job_, "bin"),
                                            extractor_->num_bins(),
                                            utterances));
    return WriteTextFile(base + PartName(split, job_, "txt"), text);
  }

  absl::StatusOr<Utterance> Make(const UtterancePlan& plan) {
    auto context = [&plan](const absl::Status& status) {
      return absl::Status(status.code(),
                          absl::StrCat(plan.id, " (voice ", plan.voice, ", \"",
                                       *plan.text, "\"): ", status.message()));
    };
    absl::StatusOr<Synthesis> synthesis = synth_->Synthesize(
        *plan.text, plan.voice, plan.duration_stretch, plan.excitation_seed);
    if (!synthesis.ok()) return context(synthesis.status());
    const FilterbankOptions& fbank = extractor_->options();
    if (synthesis->sample_rate != fbank.sample_rate) {
      return context(
          absl::InternalError(absl::StrCat("audio is ", synthesis->sample_rate,
                                           " Hz, need ", fbank.sample_rate)));
    }
    std::vector<float> samples = synthesis->FloatSamples();
    if (options_.add_noise) AddNoise(plan.snr_db, plan.noise_seed, &samples);

    Utterance utterance;
    utterance.voice = plan.voice_index;
    utterance.features = extractor_->Compute(samples);
    utterance.num_frames =
        static_cast<int>(utterance.features.size() / extractor_->num_bins());
    if (utterance.num_frames == 0) {
      return context(absl::InternalError("audio shorter than one frame"));
    }
    ASGD_RETURN_IF_ERROR(
        SubtractMean(extractor_->num_bins(), &utterance.features));
    absl::StatusOr<std::vector<int32_t>> labels = FrameLabels(
        synthesis->segments, utterance.num_frames,
        static_cast<double>(fbank.frame_shift) / fbank.sample_rate,
        static_cast<double>(fbank.frame_length) / fbank.sample_rate);
    if (!labels.ok()) return context(labels.status());
    utterance.labels = *std::move(labels);
    return utterance;
  }

  void ReportProgress() {
    ++done_;
    if (!options_.log_progress || total_ == 0) return;
    if (done_ * 10 / total_ != (done_ - 1) * 10 / total_) {
      std::fprintf(stderr,
                   "make_corpus: job %d/%d: %zu/%zu utterances (%zu%%)\n",
                   job_ + 1, jobs_, done_, total_, done_ * 100 / total_);
    }
  }

  const GeneratorOptions& options_;
  const int job_;
  const int jobs_;
  std::unique_ptr<Synthesizer> synth_;
  std::unique_ptr<FilterbankExtractor> extractor_;
  size_t total_ = 0;
  size_t done_ = 0;
};

// The body of child process `job`.
absl::Status RunJob(const GeneratorOptions& options, const Plan& plan, int job,
                    int jobs) {
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<Synthesizer> synth,
                        Synthesizer::Create(options.voices));
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<FilterbankExtractor> extractor,
                        FilterbankExtractor::Create(FilterbankOptions()));
  JobRunner runner(options, job, jobs, std::move(synth), std::move(extractor));
  return runner.Run(plan);
}

struct Child {
  pid_t pid = -1;
  int message_fd = -1;  // read end of the pipe carrying the child's error
};

// Starts one child running RunJob; it never returns in the child.
absl::StatusOr<Child> StartJob(const GeneratorOptions& options,
                               const Plan& plan, int job, int jobs) {
  int fds[2];
  if (pipe(fds) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    close(fds[0]);
    const absl::Status status = RunJob(options, plan, job, jobs);
    if (!status.ok()) {
      const std::string message =
          status.ToString().substr(0, kMaxChildMessageBytes);
      // The message is below PIPE_BUF, so one write delivers it whole.
      [[maybe_unused]] ssize_t n =
          write(fds[1], message.data(), message.size());
    }
    std::fflush(stderr);
    _exit(status.ok() ? 0 : 1);
  }
  close(fds[1]);
  return Child{pid, fds[0]};
}

// Waits for `child`; returns its failure, if any, as Internal.
absl::Status FinishJob(const Child& child, int job) {
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = read(child.message_fd, buffer, sizeof(buffer))) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    message.append(buffer, n);
  }
  close(child.message_fd);
  int wait_status = 0;
  while (waitpid(child.pid, &wait_status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat(
          "job ", job, ": waitpid failed: ", std::strerror(errno)));
    }
  }
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
    return absl::OkStatus();
  }
  std::string how =
      WIFSIGNALED(wait_status)
          ? absl::StrCat("killed by signal ", WTERMSIG(wait_status))
          : absl::StrCat("exit status ", WEXITSTATUS(wait_status));
  return absl::InternalError(absl::StrCat("job ", job, " failed (", how, ")",
                                          message.empty() ? "" : ": ",
                                          message));
}

// Runs all jobs and waits for every child, even after a failure.
absl::Status RunJobs(const GeneratorOptions& options, const Plan& plan,
                     int jobs) {
  std::vector<Child> children;
  absl::Status status;
  for (int job = 0; job < jobs; ++job) {
    absl::StatusOr<Child> child = StartJob(options, plan, job, jobs);
    if (!child.ok()) {
      status = child.status();
      break;
    }
    children.push_back(*child);
  }
  for (size_t job = 0; job < children.size(); ++job) {
    absl::Status finished = FinishJob(children[job], static_cast<int>(job));
    if (status.ok()) status = finished;
  }
  return status;
}

// Reads the parts back and writes corpus.txt.
absl::Status Finish(const GeneratorOptions& options, int jobs,
                    GenerationStats* stats) {
  const int dim = FilterbankOptions().num_bins;
  std::vector<double> sum(dim, 0.0);
  std::vector<double> sum_squares(dim, 0.0);
  std::vector<std::string> names[2];
  for (Split split : {Split::kTrain, Split::kHeldout}) {
    for (int job = 0; job < jobs; ++job) {
      const std::string name = PartName(split, job, "bin");
      names[static_cast<int>(split)].push_back(name);
      ASGD_ASSIGN_OR_RETURN(
          std::vector<Utterance> part,
          ReadUtteranceFile(absl::StrCat(options.out_dir, "/", name), dim,
                            kNumPhoneClasses));
      for (const Utterance& u : part) {
        if (split == Split::kHeldout) {
          ++stats->heldout_utterances;
          stats->heldout_frames += u.num_frames;
          continue;
        }
        ++stats->train_utterances;
        stats->train_frames += u.num_frames;
        for (int t = 0; t < u.num_frames; ++t) {
          const float* frame = &u.features[static_cast<size_t>(t) * dim];
          for (int d = 0; d < dim; ++d) {
            sum[d] += frame[d];
            sum_squares[d] += static_cast<double>(frame[d]) * frame[d];
          }
        }
      }
    }
  }
  std::vector<std::string> mean(dim);
  std::vector<std::string> stddev(dim);
  const double n = std::max<int64_t>(stats->train_frames, 1);
  for (int d = 0; d < dim; ++d) {
    const double m = sum[d] / n;
    const double variance = std::max(sum_squares[d] / n - m * m, 0.0);
    mean[d] = absl::StrFormat("%.9g", m);
    // Floored so that a reader may always divide by it.
    stddev[d] = absl::StrFormat("%.9g", std::max(std::sqrt(variance), 1e-6));
  }
  std::string metadata = absl::StrCat(
      "format asgd-corpus-1\n", "feature_dim ", dim, "\n", "num_classes ",
      kNumPhoneClasses, "\n", "classes ", absl::StrJoin(kPhoneClasses, " "),
      "\n", "mean ", absl::StrJoin(mean, " "), "\n", "stddev ",
      absl::StrJoin(stddev, " "), "\n", "seed ", options.seed, "\n",
      "train_files ", absl::StrJoin(names[0], " "), "\n", "heldout_files ",
      absl::StrJoin(names[1], " "), "\n");
  return WriteTextFile(absl::StrCat(options.out_dir, "/corpus.txt"), metadata);
}

}  // namespace

absl::Status GenerateCorpus(const GeneratorOptions& options,
                            GenerationStats* stats) {
  const absl::Time start = absl::Now();
  ASGD_RETURN_IF_ERROR(ValidateOptions(options));
  ASGD_ASSIGN_OR_RETURN(std::vector<std::string> clauses,
                        LoadClauses(options.text_dir));
  ASGD_ASSIGN_OR_RETURN(Plan plan, MakePlan(options, clauses));
  ASGD_RETURN_IF_ERROR(PrepareOutputDir(options.out_dir));

  int jobs = options.jobs;
  if (jobs <= 0)
    jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  jobs = std::min(jobs, options.num_train);
  if (options.log_progress) {
    std::fprintf(stderr,
                 "make_corpus: %d train + %d held-out utterances from %zu "
                 "sentences, %d jobs, into %s\n",
                 options.num_train, options.num_heldout, clauses.size(), jobs,
                 options.out_dir.c_str());
  }
  ASGD_RETURN_IF_ERROR(RunJobs(options, plan, jobs));

  GenerationStats local_stats;
  local_stats.jobs = jobs;
  ASGD_RETURN_IF_ERROR(Finish(options, jobs, &local_stats));
  local_stats.audio_hours =
      (local_stats.train_frames + local_stats.heldout_frames) *
      (static_cast<double>(FilterbankOptions().frame_shift) /
       FilterbankOptions().sample_rate) /
      3600.0;
  local_stats.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (options.log_progress) {
    std::fprintf(stderr,
                 "make_corpus: done: %lld utterances (%lld train, %lld "
                 "held-out), %lld frames, %.2f hours of audio, %.1f s\n",
                 static_cast<long long>(local_stats.train_utterances +
                                        local_stats.heldout_utterances),
                 static_cast<long long>(local_stats.train_utterances),
                 static_cast<long long>(local_stats.heldout_utterances),
                 static_cast<long long>(local_stats.train_frames +
                                        local_stats.heldout_frames),
                 local_stats.audio_hours, local_stats.wall_seconds);
  }
  if (stats != nullptr) *stats = local_stats;
  return absl::OkStatus();
}

}  // namespace asgd::corpus
