#include "worker/data/kaldi_data.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace asgd {

kaldi::KaldiDataOptions KaldiSourceOptions(const KaldiInput& in, int part,
                                           int num_parts, bool shuffle) {
  kaldi::KaldiDataOptions o;
  o.data_dir = in.data_dir;
  o.alignments = in.alignments;
  o.part = part;
  o.num_parts = num_parts;
  o.num_classes = in.num_classes;
  o.feature_dim = in.feature_dim;
  o.max_feature_magnitude = in.max_feature_magnitude;
  o.cmvn = in.cmvn;
  o.norm_vars = in.norm_vars;
  o.global_cmvn = in.global_cmvn;
  o.policy = in.policy;
  o.on_skip = in.on_skip;
  o.shuffle = shuffle;
  o.shuffle_buffer_utterances = 64;
  o.shuffle_buffer_bytes = std::max<int64_t>(1, in.memory_bytes / 32);
  o.max_label_memory_bytes = in.memory_bytes / 16;
  o.temp_dir = in.temp_dir;
  o.teacher_scp = in.teacher_scp;
  return o;
}

absl::StatusOr<std::unique_ptr<KaldiUtteranceStream>> KaldiUtteranceStream::Open(
    const KaldiInput& in, int part, int num_parts) {
  ASGD_ASSIGN_OR_RETURN(
      auto source, kaldi::KaldiDataSource::Create(
                       KaldiSourceOptions(in, part, num_parts, /*shuffle=*/true)));
  return std::unique_ptr<KaldiUtteranceStream>(
      new KaldiUtteranceStream(std::move(source)));
}

void KaldiUtteranceStream::StartPass(uint64_t seed, uint64_t pass) {
  // The data source draws its order from its own seed and this number.
  source_->StartEpoch(seed * 0x9e3779b97f4a7c15ull + pass);
}

absl::StatusOr<bool> KaldiUtteranceStream::Next(std::vector<float>* features,
                                                std::vector<int32_t>* labels,
                                                std::vector<float>* teacher) {
  ASGD_ASSIGN_OR_RETURN(bool more, source_->Next(&utt_));
  if (!more) return false;
  features->swap(utt_.features.data);
  labels->swap(utt_.labels);
  teacher->swap(utt_.teacher.data);
  return true;
}

absl::StatusOr<LoadedKaldiData> LoadKaldiUtterances(const KaldiInput& in,
                                                    int part, int num_parts,
                                                    int64_t max_bytes) {
  ASGD_ASSIGN_OR_RETURN(
      auto source, kaldi::KaldiDataSource::Create(KaldiSourceOptions(
                       in, part, num_parts, /*shuffle=*/false)));
  const int dim = source->feature_dim();
  const int teacher_dim = source->has_teacher() ? source->num_classes() : 0;
  const int64_t frames = source->num_frames();
  const int64_t need = frames * ExampleBytesPerFrame(dim, teacher_dim);
  if (need > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d frames of %d features take %.1f MiB in memory, more than the "
        "%.1f MiB allowed",
        in.data_dir, frames, dim, need / 1048576.0, max_bytes / 1048576.0));
  }
  LoadedKaldiData out;
  out.utterances = std::make_unique<Utterances>(dim, teacher_dim);
  out.utterances->Reserve(frames, source->num_utterances());
  kaldi::KaldiUtterance utt;
  while (true) {
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&utt));
    if (!more) break;
    out.utterances->Add(utt.features.data, utt.labels, utt.teacher.data);
  }
  out.num_classes = source->num_classes();
  out.frames_total = source->alignment_frames();
  out.bad = source->bad_data();
  out.max_abs_feature_read = source->stats().max_abs_feature_read;
  out.max_abs_feature = source->stats().max_abs_feature;
  return out;
}

namespace {

double MiB(int64_t bytes) { return bytes / 1048576.0; }

// The error of data that does not fit its share of the budget, with what to
// do about it.
absl::Status TooLarge(const absl::Status& s, absl::string_view what,
                      absl::string_view remedy) {
  if (s.code() != absl::StatusCode::kResourceExhausted) return s;
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": ", s.message(), "; ", remedy));
}

}  // namespace

absl::StatusOr<KaldiWorkerData> PrepareKaldiWorkerData(
    const KaldiInput& train_input, const KaldiInput& heldout_input,
    const ModelSpec& spec, const DataOptions& data, int index, int num_workers,
    bool shared_pool) {
  // Every utterance is judged against the model's input, the first one
  // included.
  KaldiInput train = train_input;
  train.feature_dim = spec.feature_dim;
  KaldiInput heldout = heldout_input;
  heldout.feature_dim = spec.feature_dim;
  KaldiWorkerData d;
  std::unique_ptr<KaldiUtteranceStream> stream;
  if (shared_pool) {
    absl::StatusOr<LoadedKaldiData> loaded =
        LoadKaldiUtterances(train, 0, 1, TrainingExampleBytes(train));
    if (!loaded.ok()) {
      return TooLarge(loaded.status(),
                      "the shared minibatch pool holds every training "
                      "utterance in memory",
                      "raise --kaldi_memory_mb (half of it holds the "
                      "training examples) or train without --minibatch_pool "
                      "(streamed)");
    }
    d.feature_dim = loaded->utterances->feature_dim();
    d.num_classes = loaded->num_classes;
    d.part_frames = loaded->utterances->num_frames();
    d.all_frames = loaded->frames_total;
    d.train_utts = std::move(loaded->utterances);
  } else {
    ASGD_ASSIGN_OR_RETURN(stream,
                          KaldiUtteranceStream::Open(train, index, num_workers));
    d.feature_dim = stream->feature_dim();
    d.num_classes = stream->source().num_classes();
    d.part_frames = stream->frames_per_pass();
    d.all_frames = stream->source().alignment_frames();
    d.train_utts = std::make_unique<Utterances>(d.feature_dim);  // shape only
  }
  if (absl::Status s = CheckDataFitsModel(d.feature_dim, d.num_classes, spec);
      !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        train.data_dir, " with ", train.alignments, ": ", s.message(),
        train.num_classes > 0
            ? ""
            : " (the class count is the largest pdf id in the alignments + "
              "1; give the number of pdfs, hmm-info's, with "
              "--kaldi_num_classes)"));
  }
  ASGD_ASSIGN_OR_RETURN(d.train, MakeExamples(spec, d.train_utts.get(), data));
  d.summary = absl::StrFormat(
      "Kaldi data %s: %d features, %d classes, %s%d labelled frames",
      train.data_dir, d.feature_dim, d.num_classes,
      shared_pool ? "all workers' (the shared pool, in memory) "
                  : absl::StrFormat("part %d of %d, ", index, num_workers),
      d.part_frames);
  if (stream != nullptr) {
    absl::StrAppendFormat(
        &d.summary, ", streamed in windows of at most %.1f MiB",
        MiB(TrainingExampleBytes(train)));
    auto first = std::make_shared<std::unique_ptr<KaldiUtteranceStream>>(
        std::move(stream));
    d.open_source = [first, train, spec, data, index, num_workers](
                        uint64_t seed, double epochs)
        -> absl::StatusOr<std::unique_ptr<BatchSource>> {
      std::unique_ptr<KaldiUtteranceStream> s = std::move(*first);
      if (s == nullptr) {
        ASGD_ASSIGN_OR_RETURN(
            s, KaldiUtteranceStream::Open(train, index, num_workers));
      }
      StreamOptions o;
      o.window_bytes = TrainingExampleBytes(train);
      o.seed = seed;
      o.epochs = epochs;
      ASGD_ASSIGN_OR_RETURN(std::unique_ptr<StreamSource> source,
                            StreamSource::Create(std::move(s), spec, data, o));
      return std::unique_ptr<BatchSource>(std::move(source));
    };
  }
  if (!heldout.data_dir.empty()) {
    KaldiInput h = heldout;
    h.num_classes = d.num_classes;
    absl::StatusOr<LoadedKaldiData> loaded =
        LoadKaldiUtterances(h, 0, 1, HeldoutExampleBytes(train));
    if (!loaded.ok()) {
      return TooLarge(loaded.status(),
                      "the held-out set is loaded whole",
                      "raise --kaldi_memory_mb (a quarter of it holds the "
                      "held-out set) or use a smaller held-out directory");
    }
    if (loaded->utterances->feature_dim() != d.feature_dim) {
      return absl::FailedPreconditionError(absl::StrCat(
          heldout.data_dir, " has ", loaded->utterances->feature_dim(),
          " features per frame, the training data ", d.feature_dim));
    }
    d.heldout_utts = std::move(loaded->utterances);
    ASGD_ASSIGN_OR_RETURN(d.heldout,
                          MakeExamples(spec, d.heldout_utts.get(), data));
    absl::StrAppendFormat(
        &d.summary, "; held-out %s: %d frames in memory (%.1f MiB)",
        heldout.data_dir, d.heldout_utts->num_frames(),
        MiB(d.heldout_utts->num_frames() * ExampleBytesPerFrame(d.feature_dim)));
  }
  return d;
}

}  // namespace asgd
