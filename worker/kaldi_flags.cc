#include "worker/kaldi_flags.h"

#include <sys/stat.h>

#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kaldi/archive_reader.h"
#include "kaldi/archive_writer.h"
#include "kaldi/data_source.h"
#include "kaldi/pooled_cmvn.h"

ABSL_FLAG(std::string, kaldi_data, "",
          "A Kaldi data directory to read instead of --corpus: feats.scp "
          "(archives with offsets; compressed or not), and utt2spk and "
          "cmvn.scp when present (see --kaldi_cmvn).");
ABSL_FLAG(std::string, kaldi_alignments, "",
          "Pdf-id alignments of --kaldi_data: comma-separated files and globs "
          "of int32-vector archives, binary or text, gzip'd or not, e.g. "
          "'exp/tri3_ali/pdf.*.gz' (from ali-to-pdf).");
ABSL_FLAG(std::string, bad_data, "refuse",
          "Bad input data: in Kaldi data, features and alignment of "
          "different lengths, a missing alignment, a truncated archive, a "
          "label beyond the class count, features of another dimension than "
          "the model's, unusable CMVN statistics, ...; in Kaldi data or a "
          "--corpus, NaN, Inf or a feature beyond --max_feature_magnitude. "
          "refuse: stop with a message naming the utterance, the file and "
          "the byte offset; skip: drop the utterance, log it and count it "
          "(the asgd_worker_bad_data_skipped_total metric). Files that cannot "
          "be read, or are not regular files, stop the tool either way.");
ABSL_FLAG(double, max_feature_magnitude,
          asgd::kaldi::kDefaultMaxFeatureMagnitude,
          "Bad data (reason feature_magnitude, see --bad_data): a feature "
          "whose absolute value is above this, as read (after "
          "decompression) or after normalisation (per-speaker and global "
          "CMVN, or a --corpus's mean and stddev). Finite garbage such as "
          "the bytes 7e7e7e7e (8.4e37) would otherwise reach the model. "
          "Honest features stay far below the default: the built-in demo "
          "corpus and its Kaldi export reach 13.4 as stored and 8.7 to 10.3 "
          "normalised; log-mel and MFCC features of Kaldi recipes typically "
          "stay within about 100. Raise it for features on another scale; inf: "
          "no bound (NaN and Inf are refused anyway).");
ABSL_FLAG(std::string, kaldi_cmvn, "auto",
          "Per-speaker CMVN from cmvn.scp (with utt2spk): auto (when "
          "cmvn.scp exists), off, or require.");
ABSL_FLAG(bool, kaldi_norm_vars, false,
          "With CMVN, normalise each speaker's variances too (apply-cmvn "
          "--norm-vars=true); false: means only, as apply-cmvn by default.");
ABSL_FLAG(std::string, kaldi_global_cmvn, "auto",
          "Global CMVN after the per-speaker means (as Kaldi's nnet1 recipes "
          "do; asgd's models have no input normalisation of their own): "
          "`auto`: the pooled statistics of --kaldi_data's speakers (those of "
          "the directory read: asgd_eval and asgd_forward should get the "
          "training run's file instead); `none`; or a FILE of 2 x (dim+1) "
          "statistics (a Kaldi matrix), which asgd_worker 0 writes from "
          "--kaldi_data when it does not exist yet (the others compute the "
          "same). `auto` means `none` with --kaldi_norm_vars or "
          "--kaldi_cmvn=off. A speaker whose statistics are bad (a frame "
          "count of 0, NaN) stops the tool naming the speaker and the "
          "cmvn.scp line; with --bad_data=skip it is left out of the pool "
          "and its utterances are skipped and counted.");
ABSL_FLAG(int, kaldi_num_classes, 0,
          "Output classes of the Kaldi data: the number of pdfs (hmm-info "
          "final.mdl); 0: the largest pdf id in the alignments + 1. Must be "
          "the model's --num_classes.");
ABSL_FLAG(int64_t, kaldi_memory_mb, 1024,
          "Memory for Kaldi data, MiB: half for the training examples (a "
          "streamed window; the whole training set with --minibatch_pool), a "
          "quarter for the held-out set (loaded whole), the rest for labels "
          "and read buffers. Data that does not fit is refused with a "
          "message.");
ABSL_FLAG(std::string, kaldi_temp_dir, "/tmp",
          "Where labels beyond their share of --kaldi_memory_mb spill "
          "(an unlinked temporary file).");

namespace asgd {

std::string KaldiDataFlag() { return absl::GetFlag(FLAGS_kaldi_data); }

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The statistics of in->data_dir's speakers pooled, under in->policy;
// `source` is extended with the speakers left out as bad data.
absl::StatusOr<kaldi::DoubleMatrix> Pooled(const KaldiInput& in,
                                           std::string* source) {
  std::vector<absl::Status> left_out;
  ASGD_ASSIGN_OR_RETURN(
      kaldi::DoubleMatrix pooled,
      kaldi::PooledCmvnStats(in.data_dir, {}, "", in.policy, &left_out));
  if (!left_out.empty()) {
    absl::StrAppend(source, " (", left_out.size(),
                    " speaker(s) left out as bad data, their utterances "
                    "skipped: ",
                    left_out.front().message(),
                    left_out.size() > 1 ? "; ..." : "", ")");
  }
  return pooled;
}

// Sets in->global_cmvn as `flag` says (see --kaldi_global_cmvn); returns
// where the statistics come from, for the log.
absl::StatusOr<std::string> ResolveGlobalCmvn(const std::string& flag,
                                              MissingGlobalCmvn missing,
                                              KaldiInput* in) {
  if (flag == "none" ||
      (flag == "auto" &&
       (in->norm_vars || in->cmvn == kaldi::CmvnMode::kOff ||
        !Exists(in->data_dir + "/cmvn.scp")))) {
    return std::string("none");
  }
  if (flag == "auto") {
    std::string source =
        absl::StrCat("the pooled statistics of ", in->data_dir, "/cmvn.scp");
    ASGD_ASSIGN_OR_RETURN(in->global_cmvn, Pooled(*in, &source));
    return source;
  }
  if (Exists(flag)) {
    ASGD_ASSIGN_OR_RETURN(in->global_cmvn, kaldi::ReadDoubleMatrixFile(flag));
    return flag;
  }
  if (missing == MissingGlobalCmvn::kError) {
    return absl::NotFoundError(absl::StrCat(
        "--kaldi_global_cmvn=", flag,
        ": no such file (asgd_worker writes it from its training directory)"));
  }
  std::string pooled_source =
      absl::StrCat("the pooled statistics of ", in->data_dir, "/cmvn.scp");
  ASGD_ASSIGN_OR_RETURN(in->global_cmvn, Pooled(*in, &pooled_source));
  if (missing == MissingGlobalCmvn::kCompute) {
    return absl::StrCat(pooled_source, " (worker 0 writes them to ", flag, ")");
  }
  std::string bytes;
  kaldi::EncodeDoubleMatrix(in->global_cmvn, &bytes);
  ASGD_RETURN_IF_ERROR(kaldi::WriteFileAtomically(flag, bytes));
  return absl::StrCat(flag, " (written: ", pooled_source, ")");
}

}  // namespace

absl::StatusOr<kaldi::BadDataPolicy> BadDataPolicyFromFlags() {
  absl::StatusOr<kaldi::BadDataPolicy> policy =
      kaldi::ParseBadDataPolicy(absl::GetFlag(FLAGS_bad_data));
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bad_data: ", policy.status().message()));
  }
  return *policy;
}

absl::StatusOr<float> MaxFeatureMagnitudeFromFlags() {
  const double bound = absl::GetFlag(FLAGS_max_feature_magnitude);
  if (!(bound > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_feature_magnitude must be > 0 (inf: no bound), not ", bound));
  }
  return static_cast<float>(bound);
}

absl::StatusOr<corpus::CorpusReadOptions> CorpusReadOptionsFromFlags() {
  corpus::CorpusReadOptions o;
  ASGD_ASSIGN_OR_RETURN(o.policy, BadDataPolicyFromFlags());
  ASGD_ASSIGN_OR_RETURN(o.max_feature_magnitude,
                        MaxFeatureMagnitudeFromFlags());
  return o;
}

absl::StatusOr<KaldiInput> KaldiInputFromFlags(bool need_alignments,
                                               MissingGlobalCmvn missing) {
  KaldiInput in;
  in.data_dir = absl::GetFlag(FLAGS_kaldi_data);
  in.alignments = absl::GetFlag(FLAGS_kaldi_alignments);
  if (in.data_dir.empty()) {
    return absl::InvalidArgumentError("--kaldi_data is required");
  }
  if (need_alignments && in.alignments.empty()) {
    return absl::InvalidArgumentError(
        "--kaldi_data needs --kaldi_alignments (pdf ids: ali-to-pdf "
        "final.mdl \"ark:gunzip -c ali.*.gz|\" ark:pdf.ark)");
  }
  ASGD_ASSIGN_OR_RETURN(in.policy, BadDataPolicyFromFlags());
  ASGD_ASSIGN_OR_RETURN(in.max_feature_magnitude,
                        MaxFeatureMagnitudeFromFlags());
  const std::string cmvn = absl::GetFlag(FLAGS_kaldi_cmvn);
  if (cmvn == "auto") {
    in.cmvn = kaldi::CmvnMode::kAuto;
  } else if (cmvn == "off") {
    in.cmvn = kaldi::CmvnMode::kOff;
  } else if (cmvn == "require") {
    in.cmvn = kaldi::CmvnMode::kRequire;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kaldi_cmvn=", cmvn, ": want auto, off or require"));
  }
  in.norm_vars = absl::GetFlag(FLAGS_kaldi_norm_vars);
  ASGD_ASSIGN_OR_RETURN(in.global_cmvn_source,
                        ResolveGlobalCmvn(absl::GetFlag(FLAGS_kaldi_global_cmvn),
                                          missing, &in));
  in.num_classes = absl::GetFlag(FLAGS_kaldi_num_classes);
  if (in.num_classes < 0) {
    return absl::InvalidArgumentError("--kaldi_num_classes must be >= 0");
  }
  const int64_t mb = absl::GetFlag(FLAGS_kaldi_memory_mb);
  if (mb < 1 || mb > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        "--kaldi_memory_mb must be in [1, 2^30]");
  }
  in.memory_bytes = mb << 20;
  in.temp_dir = absl::GetFlag(FLAGS_kaldi_temp_dir);
  return in;
}

BadDataReporter::BadDataReporter(std::ostream* log, std::string prefix,
                                 prometheus::Registry* registry,
                                 int worker_index, int max_lines)
    : log_(log), prefix_(std::move(prefix)), max_lines_(max_lines) {
  if (registry == nullptr) return;
  auto& family = prometheus::BuildCounter()
                     .Name("asgd_worker_bad_data_skipped_total")
                     .Help("Utterances skipped as bad data (--bad_data=skip), "
                           "by reason.")
                     .Labels({{"worker", absl::StrCat(worker_index)}})
                     .Register(*registry);
  for (int r = 1; r < kaldi::kNumBadDataReasons; ++r) {
    counters_[r] = &family.Add(
        {{"reason", std::string(kaldi::BadDataReasonName(
                        static_cast<kaldi::BadDataReason>(r)))}});
  }
}

void BadDataReporter::Report(const absl::Status& status) {
  const kaldi::BadDataReason reason = kaldi::BadDataReasonOf(status);
  if (counters_[static_cast<int>(reason)] != nullptr) {
    counters_[static_cast<int>(reason)]->Increment();
  }
  absl::MutexLock lock(&mu_);
  counts_.Add(reason);
  if (log_ == nullptr || lines_ > max_lines_) return;
  if (lines_++ < max_lines_) {
    *log_ << prefix_ << "skipped bad data: " << status.message() << std::endl;
  } else {
    *log_ << prefix_ << "more bad data skipped: counted, no longer logged"
          << std::endl;
  }
}

kaldi::BadDataCounts BadDataReporter::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace asgd
