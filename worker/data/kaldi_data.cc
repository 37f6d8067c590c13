#include "worker/data/kaldi_data.h"

#include <algorithm>

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
  o.cmvn = in.cmvn;
  o.norm_vars = in.norm_vars;
  o.policy = in.policy;
  o.on_skip = in.on_skip;
  o.shuffle = shuffle;
  o.shuffle_buffer_utterances = 64;
  o.shuffle_buffer_bytes = std::max<int64_t>(1, in.memory_bytes / 32);
  o.max_label_memory_bytes = in.memory_bytes / 16;
  o.temp_dir = in.temp_dir;
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
                                                std::vector<int32_t>* labels) {
  ASGD_ASSIGN_OR_RETURN(bool more, source_->Next(&utt_));
  if (!more) return false;
  features->swap(utt_.features.data);
  labels->swap(utt_.labels);
  return true;
}

absl::StatusOr<LoadedKaldiData> LoadKaldiUtterances(const KaldiInput& in,
                                                    int part, int num_parts,
                                                    int64_t max_bytes) {
  ASGD_ASSIGN_OR_RETURN(
      auto source, kaldi::KaldiDataSource::Create(KaldiSourceOptions(
                       in, part, num_parts, /*shuffle=*/false)));
  const int dim = source->feature_dim();
  const int64_t frames = source->num_frames();
  const int64_t need = frames * ExampleBytesPerFrame(dim);
  if (need > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: %d frames of %d features take %.1f MiB in memory, more than the "
        "%.1f MiB allowed",
        in.data_dir, frames, dim, need / 1048576.0, max_bytes / 1048576.0));
  }
  LoadedKaldiData out;
  out.utterances = std::make_unique<Utterances>(dim);
  out.utterances->Reserve(frames, source->num_utterances());
  kaldi::KaldiUtterance utt;
  while (true) {
    ASGD_ASSIGN_OR_RETURN(bool more, source->Next(&utt));
    if (!more) break;
    out.utterances->Add(utt.features.data, utt.labels);
  }
  out.num_classes = source->num_classes();
  out.frames_total = source->alignment_frames();
  out.bad = source->bad_data();
  return out;
}

}  // namespace asgd
