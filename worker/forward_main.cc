// asgd_forward: runs a trained model over a Kaldi data directory and writes,
// per utterance, its pseudo-log-likelihoods (log posterior − log prior, what
// latgen-faster-mapped decodes) or its log-posteriors, as a float-matrix
// archive (frames × pdfs) with an scp.
//
//   asgd_forward --model=exp/asgd/final.mdl --kaldi_data=data/test
//       --priors=exp/asgd/prior.vec
//       --out=exp/asgd/loglikes.ark --out_scp=exp/asgd/loglikes.scp
//   latgen-faster-mapped ... exp/tri3/final.mdl exp/tri3/graph/HCLG.fst
//       ark:exp/asgd/loglikes.ark "ark:|gzip -c > lat.1.gz"
//
// Features are normalised as in training (--kaldi_cmvn, --kaldi_norm_vars,
// --kaldi_global_cmvn: use the training run's settings and statistics file);
// frame models see each frame with its context, recurrent models each whole
// utterance as one sequence.
//
// With --active_pdfs (worker/lazy_forward.h) only the pdfs a decoder asks
// for at each frame are scored, read from Kaldi posterior archives, and
// --out gets a posterior archive of (pdf, score) pairs instead.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/main_preamble.h"
#include "common/status_macros.h"
#include "common/security_flags.h"
#include "kaldi/alignments.h"
#include "kaldi/archive_reader.h"
#include "kaldi/archive_writer.h"
#include "kaldi/data_source.h"
#include "kaldi/priors.h"
#include "model/backend_factory.h"
#include "model/cuda/cuda_options.h"
#include "worker/data/kaldi_data.h"
#include "worker/kaldi_flags.h"
#include "worker/lazy_forward.h"
#include "worker/model_source.h"
#include "worker/utterance_scorer.h"

ABSL_FLAG(std::string, model, "", "A model saved with --save_model.");
ABSL_FLAG(std::string, servers, "",
          "Instead of --model: the model on this pool now (host:port,...).");
ABSL_FLAG(std::string, priors, "",
          "Pdf priors, a Kaldi vector (compute_priors --priors_out, or "
          "analyze-counts output normalised): write pseudo-log-likelihoods, "
          "log posterior - log prior, for latgen-faster-mapped.");
ABSL_FLAG(bool, log_posteriors, false,
          "Without --priors: write the log-posteriors themselves.");
ABSL_FLAG(double, prior_floor, 1e-10,
          "Priors below this (pdfs never seen in training) make their "
          "pseudo-log-likelihood hugely negative, so the decoder avoids them.");
ABSL_FLAG(std::string, out, "",
          "The float-matrix archive to write (frames x pdfs per utterance); "
          "a name ending in .gz is gzip'd.");
ABSL_FLAG(std::string, out_scp, "", "Also write an scp of --out here.");
ABSL_FLAG(std::string, backend, "cpu",
          "cpu, cuda or auto (see asgd_worker --backend).");
ABSL_FLAG(int, cuda_device, 0, "CUDA device index for --backend=cuda/auto.");
ABSL_FLAG(int, batch_frames, 1024,
          "Frame models: frames per forward pass (recurrent models take each "
          "whole utterance).");
ABSL_FLAG(int, frame_skip, 1,
          "Frame models: compute every k-th frame's scores and copy them to "
          "the k - 1 frames after it (1/k of the forward passes; 1: every "
          "frame).");
ABSL_FLAG(int64_t, max_frames, 1 << 17,
          "The longest utterance accepted, in frames (longer ones are an "
          "error, or skipped with --bad_data=skip).");
ABSL_FLAG(std::string, active_pdfs, "",
          "Lazy output evaluation: Kaldi posterior archives (files and globs, "
          "comma-separated) whose ids per frame are the pdfs to score, e.g. "
          "a lattice's (lattice-to-post | post-to-pdf-post) or an "
          "alignment's (ali-to-post of ali-to-pdf). --out then gets a "
          "posterior archive of (pdf, score) pairs per frame: the pdf's logit "
          "(minus its log prior with --priors), the log-posterior (or "
          "pseudo-log-likelihood) plus one constant per frame. Frame models "
          "of one output frame, on the CPU, without --frame_skip.");
ABSL_FLAG(bool, compare_full_layer, false,
          "With --active_pdfs: also compute the full output layer on the same "
          "frames, a frame at a time and in batches of --batch_frames, check "
          "it against the lazy scores and print what each costs.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads.");
ABSL_FLAG(int, connect_timeout_s, 30, "Seconds to wait for the servers.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) { return ReportFailure("asgd_forward", s); }

// The log-priors of --priors (floored at --prior_floor), one per class of
// `spec`.
absl::StatusOr<std::vector<float>> ReadLogPriors(const std::string& path,
                                                 const ModelSpec& spec) {
  auto priors = kaldi::ReadFloatVectorFile(path);
  if (!priors.ok()) return priors.status();
  if (static_cast<int>(priors->size()) != spec.num_classes) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s holds %d priors but the model has %d classes", path,
                        priors->size(), spec.num_classes));
  }
  return kaldi::LogPriors(*priors,
                          static_cast<float>(absl::GetFlag(FLAGS_prior_floor)));
}

absl::Status CheckFlags() {
  if (absl::GetFlag(FLAGS_out).empty()) {
    return absl::InvalidArgumentError("--out is required");
  }
  if (absl::GetFlag(FLAGS_priors).empty() ==
      !absl::GetFlag(FLAGS_log_posteriors)) {
    return absl::InvalidArgumentError(
        "give --priors (pseudo-log-likelihoods for latgen-faster-mapped) or "
        "--log_posteriors, not both");
  }
  if (absl::GetFlag(FLAGS_active_pdfs).empty()) {
    if (absl::GetFlag(FLAGS_compare_full_layer)) {
      return absl::InvalidArgumentError(
          "--compare_full_layer compares lazy output evaluation: it needs "
          "--active_pdfs");
    }
    return absl::OkStatus();
  }
  if (absl::GetFlag(FLAGS_frame_skip) != 1) {
    return absl::InvalidArgumentError(
        "--active_pdfs scores every frame's lists: drop --frame_skip");
  }
  if (absl::GetFlag(FLAGS_backend) != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--active_pdfs scores on the CPU (a decoder's frame-by-frame "
        "lookups), not --backend=",
        absl::GetFlag(FLAGS_backend)));
  }
  return absl::OkStatus();
}

struct DenseCounts {
  int64_t utterances = 0;
  int64_t frames = 0;
};

// Every utterance of `source` through the whole model: a float-matrix entry
// each.
absl::StatusOr<DenseCounts> ScoreDense(const ModelSpec& spec,
                                       const SavedModel& model,
                                       const std::vector<float>& log_priors,
                                       kaldi::BadDataPolicy policy,
                                       kaldi::KaldiDataSource* source,
                                       kaldi::ArchiveWriter* writer,
                                       BadDataReporter* bad_data) {
  CudaOptions cuda;
  cuda.device = absl::GetFlag(FLAGS_cuda_device);
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  auto factory = [backend_name, cuda](const ModelSpec& s, int rows) {
    std::string note;
    return CreateBackend(backend_name, s, rows, &note, cuda);
  };
  ScorerOptions scorer_options;
  scorer_options.batch_rows = absl::GetFlag(FLAGS_batch_frames);
  scorer_options.max_frames = absl::GetFlag(FLAGS_max_frames);
  scorer_options.frame_skip = absl::GetFlag(FLAGS_frame_skip);
  ASGD_ASSIGN_OR_RETURN(auto scorer,
                        UtteranceScorer::Create(spec, model.params, factory,
                                                scorer_options));
  kaldi::KaldiUtterance utt;
  kaldi::Matrix scores;
  DenseCounts counts;
  while (true) {
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&utt));
    if (!more) break;
    const int64_t t = utt.num_frames();
    absl::Status s = scorer->LogPosteriors(utt.features.data, t, &scores.data);
    if (!s.ok()) {
      s = absl::Status(s.code(), absl::StrCat("utterance ", utt.key, ": ",
                                              s.message()));
      if (policy == kaldi::BadDataPolicy::kSkip &&
          s.code() == absl::StatusCode::kInvalidArgument) {
        bad_data->Report(s);
        continue;
      }
      return s;
    }
    scores.rows = static_cast<int32_t>(t);
    scores.cols = spec.num_classes;
    if (!log_priors.empty()) kaldi::SubtractLogPriors(log_priors, &scores);
    ASGD_RETURN_IF_ERROR(writer->WriteMatrix(utt.key, scores));
    ++counts.utterances;
    counts.frames += t;
  }
  return counts;
}

int Run() {
  if (absl::Status s = CheckFlags(); !s.ok()) return Fail(s);
  const std::string out_path = absl::GetFlag(FLAGS_out);
  const std::string priors_path = absl::GetFlag(FLAGS_priors);
  const bool lazy = !absl::GetFlag(FLAGS_active_pdfs).empty();
  auto input = KaldiInputFromFlags(/*need_alignments=*/false,
                                   MissingGlobalCmvn::kError);
  if (!input.ok()) return Fail(input.status());
  SetBlasThreads(absl::GetFlag(FLAGS_blas_threads));

  auto security = SecurityOptionsFromFlags();
  if (!security.ok()) return Fail(security.status());
  auto loaded = LoadModelFrom(
      absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_servers), *security,
      absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s)));
  if (!loaded.ok()) return Fail(loaded.status());
  const ModelSpec& spec = loaded->model.spec;

  std::vector<float> log_priors;
  if (!priors_path.empty()) {
    auto read = ReadLogPriors(priors_path, spec);
    if (!read.ok()) return Fail(read.status());
    log_priors = *std::move(read);
  }

  // Features only: the data needs no alignments.
  BadDataReporter bad_data(&std::cout, "asgd_forward: ", nullptr, 0);
  input->on_skip = bad_data.Callback();
  absl::flat_hash_map<std::string, ActiveOutputs> lists;
  if (lazy) {
    auto files = kaldi::ExpandFileList(absl::GetFlag(FLAGS_active_pdfs));
    if (!files.ok()) return Fail(files.status());
    auto read = ReadActiveLists(*files, input->policy, &bad_data);
    if (!read.ok()) return Fail(read.status());
    lists = *std::move(read);
  }
  kaldi::KaldiDataOptions data = KaldiSourceOptions(*input, 0, 1, false);
  data.alignments.clear();
  data.features_only = true;
  data.feature_dim = spec.feature_dim;
  auto source = kaldi::KaldiDataSource::Create(data);
  if (!source.ok()) return Fail(source.status());

  kaldi::ArchiveWriterOptions w;
  w.ark_path = out_path;
  w.scp_path = absl::GetFlag(FLAGS_out_scp);
  auto writer = kaldi::ArchiveWriter::Create(w);
  if (!writer.ok()) return Fail(writer.status());

  std::printf("asgd_forward: %s (%s) over %s, %s; global CMVN: %s\n",
              loaded->source.c_str(), DescribeModel(spec).c_str(),
              input->data_dir.c_str(),
              (*source)->cmvn_applied()
                  ? (input->norm_vars ? "CMVN per speaker (means, variances)"
                                      : "CMVN per speaker (means)")
                  : "no CMVN per speaker",
              input->global_cmvn_source.c_str());
  const absl::Time start = absl::Now();
  DenseCounts counts;
  std::string lazy_line;
  if (lazy) {
    LazyScorerOptions o;
    o.batch_rows = absl::GetFlag(FLAGS_batch_frames);
    o.max_frames = absl::GetFlag(FLAGS_max_frames);
    o.compare_full = absl::GetFlag(FLAGS_compare_full_layer);
    auto result = RunLazyForward(spec, loaded->model.params, log_priors, lists,
                                 o, input->policy, source->get(),
                                 writer->get(), &bad_data);
    if (!result.ok()) return Fail(result.status());
    counts = {result->utterances, result->stats.frames};
    lazy_line = DescribeLazyForward(*result, spec.num_classes, o.batch_rows);
  } else {
    auto dense = ScoreDense(spec, loaded->model, log_priors, input->policy,
                            source->get(), writer->get(), &bad_data);
    if (!dense.ok()) return Fail(dense.status());
    counts = *dense;
  }
  if (absl::Status s = (*writer)->Close(); !s.ok()) return Fail(s);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf(
      "asgd_forward: wrote %s of %lld utterances, %lld frames (%d pdfs) to "
      "%s%s%s in %.1f s; bad data skipped: %s; largest |feature| %.4g as "
      "read, %.4g normalised (bound %g)\n",
      lazy ? "the active pdfs' scores"
           : (log_priors.empty() ? "log-posteriors" : "pseudo-log-likelihoods"),
      static_cast<long long>(counts.utterances),
      static_cast<long long>(counts.frames), spec.num_classes,
      out_path.c_str(), w.scp_path.empty() ? "" : " + ", w.scp_path.c_str(),
      seconds, bad_data.counts().ToString().c_str(),
      (*source)->stats().max_abs_feature_read,
      (*source)->stats().max_abs_feature, input->max_feature_magnitude);
  if (lazy) std::printf("asgd_forward: lazy output: %s\n", lazy_line.c_str());
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd forward: per-utterance pseudo-log-likelihoods (log posterior - "
      "log prior) or log-posteriors of a trained model over a Kaldi data "
      "directory, as a float-matrix archive for latgen-faster-mapped; or, "
      "with --active_pdfs, the scores of each frame's listed pdfs only.\n"
      "Example: asgd_forward --model=final.mdl --kaldi_data=data/test "
      "--priors=prior.vec --out=loglikes.ark --out_scp=loglikes.scp");
  return asgd::Run();
}
