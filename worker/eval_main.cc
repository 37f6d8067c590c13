// asgd_eval: held-out frame accuracy of the model on a server pool or of a
// saved model, on a corpus's held-out split or a Kaldi data directory with
// pdf alignments (loaded into memory). Any model kind (the model says how
// its examples are made).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/main_preamble.h"
#include "common/security_flags.h"
#include "common/status_macros.h"
#include "corpus/corpus_io.h"
#include "model/cpu_backend.h"
#include "model/model_file.h"
#include "worker/data/kaldi_data.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"
#include "worker/kaldi_flags.h"
#include "worker/loop/loop.h"
#include "worker/model_source.h"
#include "worker/utterance_scorer.h"

ABSL_FLAG(std::string, corpus, "",
          "Corpus directory (its held-out split is used); or --kaldi_data "
          "with --kaldi_alignments (all of it is used).");
ABSL_FLAG(std::string, servers, "",
          "Evaluate the model currently on this pool (host:port,...).");
ABSL_FLAG(std::string, model, "", "Evaluate this saved model instead.");
ABSL_FLAG(int, batch_size, 1024, "Frames per evaluation batch.");
ABSL_FLAG(int, chunk_frames, 20,
          "Recurrent models: labelled frames per chunk (as in training).");
ABSL_FLAG(int, chunk_left_context, -1,
          "Recurrent models: extra frames before each chunk (-1: the "
          "model's default).");
ABSL_FLAG(int, chunk_right_context, -1,
          "Recurrent models: extra frames after each chunk (-1: the model's "
          "default).");
ABSL_FLAG(int, connect_timeout_s, 30, "Seconds to wait for the servers.");
ABSL_FLAG(int, frame_skip, 1,
          "Frame models: score utterance by utterance as asgd_forward "
          "--frame_skip does (every k-th frame computed, its scores copied to "
          "the next k - 1), to see what skipping costs in accuracy. A "
          "multi-frame model is always scored so (by its heads); keep 1.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) { return ReportFailure("asgd_eval", s); }

// The held-out accuracy of whole utterances scored as asgd_forward scores
// them (UtteranceScorer): with frame skipping, or a multi-frame model's
// heads.
absl::StatusOr<double> UtteranceAccuracy(const ModelSpec& spec,
                                        const std::vector<float>& params,
                                        const Utterances& utterances,
                                        int frame_skip) {
  ScorerOptions options;
  options.frame_skip = frame_skip;
  ASGD_ASSIGN_OR_RETURN(
      std::unique_ptr<UtteranceScorer> scorer,
      UtteranceScorer::Create(spec, params, CpuBackendFactory(), options));
  const int c = spec.num_classes;
  const int dim = utterances.feature_dim();
  int64_t correct = 0, labelled = 0;
  std::vector<float> scores;
  for (int u = 0; u < utterances.num_utterances(); ++u) {
    const int64_t begin = utterances.begin(u), end = utterances.end(u);
    ASGD_RETURN_IF_ERROR(scorer->LogPosteriors(
        absl::MakeConstSpan(utterances.frame(begin), (end - begin) * dim),
        end - begin, &scores));
    for (int64_t f = begin; f < end; ++f) {
      const float* row = scores.data() + (f - begin) * c;
      if (utterances.label(f) == kNoLabel) continue;
      ++labelled;
      correct += std::max_element(row, row + c) - row == utterances.label(f);
    }
  }
  return labelled > 0 ? static_cast<double>(correct) / labelled : 0.0;
}

int Run() {
  const std::string servers = absl::GetFlag(FLAGS_servers);
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const bool kaldi = !KaldiDataFlag().empty();
  if (absl::GetFlag(FLAGS_corpus).empty() == !kaldi) {
    return Fail(absl::InvalidArgumentError(
        "give exactly one of --corpus and --kaldi_data"));
  }
  KaldiInput kaldi_input;
  if (kaldi) {
    auto input = KaldiInputFromFlags(/*need_alignments=*/true,
                                     MissingGlobalCmvn::kError);
    if (!input.ok()) return Fail(input.status());
    kaldi_input = *input;
  }

  auto security = SecurityOptionsFromFlags();
  if (!security.ok()) return Fail(security.status());
  auto loaded_model =
      LoadModelFrom(model_path, servers, *security,
                    absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s)));
  if (!loaded_model.ok()) return Fail(loaded_model.status());
  const ModelSpec spec = loaded_model->model.spec;
  const std::vector<float>& params = loaded_model->model.params;
  const std::string& source = loaded_model->source;
  std::unique_ptr<Utterances> utterances;
  BadDataReporter bad_data(&std::cout, "asgd_eval: ", nullptr, 0);
  if (kaldi) {
    // The model's classes unless told otherwise: a held-out set need not
    // use the largest pdf id.
    if (kaldi_input.num_classes == 0) kaldi_input.num_classes = spec.num_classes;
    // Every utterance is judged against the model's input, the first one
    // included: one of another dimension is bad data (skipped or refused).
    kaldi_input.feature_dim = spec.feature_dim;
    kaldi_input.on_skip = bad_data.Callback();
    auto loaded = LoadKaldiUtterances(kaldi_input, 0, 1,
                                      TrainingExampleBytes(kaldi_input));
    if (!loaded.ok()) return Fail(loaded.status());
    if (absl::Status s =
            CheckDataFitsModel(loaded->utterances->feature_dim(),
                               loaded->num_classes, spec);
        !s.ok()) {
      return Fail(s);
    }
    utterances = std::move(loaded->utterances);
    std::printf(
        "asgd_eval: %s: %d utterances, global CMVN: %s, bad data skipped: "
        "%s; largest |feature| %.4g as read, %.4g normalised (bound %g)\n",
        kaldi_input.data_dir.c_str(), utterances->num_utterances(),
        kaldi_input.global_cmvn_source.c_str(), loaded->bad.ToString().c_str(),
        loaded->max_abs_feature_read, loaded->max_abs_feature,
        kaldi_input.max_feature_magnitude);
  } else {
    auto read_options = CorpusReadOptionsFromFlags();
    if (!read_options.ok()) return Fail(read_options.status());
    read_options->on_skip = bad_data.Callback();
    auto corpus =
        corpus::LoadCorpus(absl::GetFlag(FLAGS_corpus), *read_options);
    if (!corpus.ok()) return Fail(corpus.status());
    std::printf("asgd_eval: %s: bad data skipped: %s\n",
                absl::GetFlag(FLAGS_corpus).c_str(),
                corpus->bad.ToString().c_str());
    if (absl::Status s = CheckDataFitsModel(corpus->info.feature_dim,
                                            corpus->info.num_classes, spec);
        !s.ok()) {
      return Fail(s);
    }
    utterances = std::make_unique<Utterances>(
        Utterances::FromCorpus(corpus->info, corpus->heldout));
  }
  DataOptions data;
  data.chunk_frames = absl::GetFlag(FLAGS_chunk_frames);
  data.left_context = absl::GetFlag(FLAGS_chunk_left_context);
  data.right_context = absl::GetFlag(FLAGS_chunk_right_context);
  auto heldout = MakeExamples(spec, utterances.get(), data);
  if (!heldout.ok()) return Fail(heldout.status());
  const BatchShape shape =
      ShapeOfBatch(**heldout, std::max(1, absl::GetFlag(FLAGS_batch_size)));
  auto backend = CreateCpuBackend(spec, shape.rows());
  if (!backend.ok()) return Fail(backend.status());
  const absl::Time start = absl::Now();
  const int frame_skip = absl::GetFlag(FLAGS_frame_skip);
  const bool by_utterance = frame_skip != 1 || spec.output_frames > 1;
  auto accuracy =
      by_utterance
          ? UtteranceAccuracy(spec, params, *utterances, frame_skip)
          : EvaluateAccuracy(backend->get(), params, **heldout, shape.examples);
  if (!accuracy.ok()) return Fail(accuracy.status());
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("evaluated %s (%s) on %lld held-out frames "
              "(always-majority-class baseline %.1f%%)\n",
              source.c_str(), DescribeModel(spec).c_str(),
              static_cast<long long>(utterances->num_frames()),
              100 * utterances->MajorityClassRate());
  std::printf("forward passes: %.3f s, %.0f frames/s (OPENBLAS_NUM_THREADS "
              "sets the cores)\n",
              seconds, seconds > 0 ? utterances->num_frames() / seconds : 0.0);
  if (spec.output_frames > 1) {
    std::printf("scored as asgd_forward scores it: one frame in %d "
                "computed, its %d heads scoring that frame and the next %d\n",
                spec.output_frames, spec.output_frames,
                spec.output_frames - 1);
  }
  // The count and three decimals, to tell close models apart; the last line
  // stays the one scripts read.
  const long long frames = utterances->num_frames();
  std::printf("frames scored right: %lld of %lld (%.3f%%)\n",
              std::llround(*accuracy * frames), frames, 100 * *accuracy);
  std::printf("held-out frame accuracy: %.1f%%\n", 100 * *accuracy);
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd eval: held-out frame accuracy of the model on an asgd server pool "
      "(--servers) or of a saved model (--model), on a corpus's held-out "
      "split.\nExample: asgd_eval --corpus=/tmp/asgd-demo/corpus "
      "--servers=127.0.0.1:5001,127.0.0.1:5002");
  return asgd::Run();
}
