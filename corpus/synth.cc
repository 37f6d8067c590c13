#include "corpus/synth.h"

#include <flite/flite.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "corpus/phone_set.h"

// flite's voice libraries define these without declaring them in a header.
extern "C" {
cst_voice* register_cmu_us_kal16(const char* voxdir);
void unregister_cmu_us_kal16(cst_voice* voice);
cst_voice* register_cmu_us_awb(const char* voxdir);
void unregister_cmu_us_awb(cst_voice* voice);
cst_voice* register_cmu_us_rms(const char* voxdir);
void unregister_cmu_us_rms(cst_voice* voice);
cst_voice* register_cmu_us_slt(const char* voxdir);
void unregister_cmu_us_slt(cst_voice* voice);
}

namespace asgd::corpus {
namespace {

struct VoiceLibrary {
  absl::string_view name;
  cst_voice* (*register_voice)(const char* voxdir);
  void (*unregister_voice)(cst_voice* voice);
};

// In kVoiceNames order.
constexpr VoiceLibrary kVoiceLibraries[] = {
    {"kal16", register_cmu_us_kal16, unregister_cmu_us_kal16},
    {"awb", register_cmu_us_awb, unregister_cmu_us_awb},
    {"rms", register_cmu_us_rms, unregister_cmu_us_rms},
    {"slt", register_cmu_us_slt, unregister_cmu_us_slt},
};
static_assert(std::size(kVoiceLibraries) == kVoiceNames.size());
static_assert(kVoiceLibraries[0].name == kVoiceNames[0] &&
              kVoiceLibraries[1].name == kVoiceNames[1] &&
              kVoiceLibraries[2].name == kVoiceNames[2] &&
              kVoiceLibraries[3].name == kVoiceNames[3]);

// Set while a Synthesizer exists: flite keeps each registered voice in a
// process-wide variable, so two instances would share and double-free them.
std::atomic<bool> synthesizer_exists{false};

// Runs flite_synth_text with flite's error hook pointed here, so that an
// internal flite error returns nullptr instead of exiting the process. No
// C++ object with a destructor lives in this frame, so longjmp is safe.
cst_utterance* SynthesizeOrNull(const char* text, cst_voice* voice) {
  jmp_buf env;
  jmp_buf* const saved = cst_errjmp;
  cst_errjmp = &env;
  if (setjmp(env) != 0) {
    cst_errjmp = saved;
    return nullptr;
  }
  cst_utterance* utterance = flite_synth_text(text, voice);
  cst_errjmp = saved;
  return utterance;
}

}  // namespace

absl::StatusOr<int> VoiceIndex(absl::string_view name) {
  for (size_t i = 0; i < kVoiceNames.size(); ++i) {
    if (kVoiceNames[i] == name) return static_cast<int>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown voice \"", name,
                   "\"; known voices: ", absl::StrJoin(kVoiceNames, ", ")));
}

std::vector<float> Synthesis::FloatSamples() const {
  std::vector<float> result(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    result[i] = samples[i] * (1.0f / 32768.0f);
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Synthesizer>> Synthesizer::Create(
    absl::Span<const std::string> voices) {
  if (voices.empty()) return absl::InvalidArgumentError("no voice given");
  for (size_t i = 0; i < voices.size(); ++i) {
    if (absl::StatusOr<int> index = VoiceIndex(voices[i]); !index.ok()) {
      return index.status();
    }
    for (size_t j = 0; j < i; ++j) {
      if (voices[j] == voices[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("voice \"", voices[i], "\" given twice"));
      }
    }
  }
  if (synthesizer_exists.exchange(true)) {
    return absl::FailedPreconditionError(
        "another Synthesizer exists in this process; flite allows one");
  }
  flite_init();
  VoiceList registered;
  for (const std::string& name : voices) {
    const VoiceLibrary& library = kVoiceLibraries[*VoiceIndex(name)];
    cst_voice* voice = library.register_voice(nullptr);
    if (voice == nullptr) {
      // The destructor of the partial Synthesizer unregisters the others.
      Synthesizer partial(std::move(registered));
      return absl::InternalError(
          absl::StrCat("flite cannot load voice \"", name, "\""));
    }
    registered.emplace_back(name, voice);
  }
  return absl::WrapUnique(new Synthesizer(std::move(registered)));
}

Synthesizer::Synthesizer(VoiceList voices) : voices_(std::move(voices)) {}

Synthesizer::~Synthesizer() {
  for (auto& [name, voice] : voices_) {
    kVoiceLibraries[*VoiceIndex(name)].unregister_voice(voice);
  }
  synthesizer_exists.store(false);
}

absl::StatusOr<Synthesis> Synthesizer::Synthesize(absl::string_view text,
                                                  absl::string_view voice_name,
                                                  float duration_stretch,
                                                  unsigned random_seed) {
  cst_voice* voice = nullptr;
  for (const auto& [name, registered] : voices_) {
    if (name == voice_name) voice = registered;
  }
  if (voice == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("voice \"", voice_name, "\" is not loaded"));
  }
  if (!(duration_stretch >= 0.25f && duration_stretch <= 4.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "duration_stretch ", duration_stretch, " is outside [0.25, 4]"));
  }
  // Utterances inherit the voice's features, so this applies to the next
  // synthesis.
  feat_set_float(voice->features, "duration_stretch", duration_stretch);

  std::srand(random_seed);
  const std::string text_copy(text);
  cst_utterance* utterance = SynthesizeOrNull(text_copy.c_str(), voice);
  if (utterance == nullptr) {
    return absl::InternalError(
        absl::StrCat("flite failed to synthesise \"", text, "\""));
  }
  Synthesis result;
  const cst_wave* wave = utt_wave(utterance);
  if (wave != nullptr && wave->num_samples > 0 && wave->num_channels == 1) {
    result.sample_rate = wave->sample_rate;
    result.samples.assign(wave->samples, wave->samples + wave->num_samples);
  }
  for (const cst_item* item = relation_head(utt_relation(utterance, "Segment"));
       item != nullptr; item = item_next(item)) {
    result.segments.push_back(
        {item_feat_string(item, "name"), item_feat_float(item, "end")});
  }
  delete_utterance(utterance);

  if (result.samples.empty() || result.segments.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flite made no mono audio or no phones for \"", text, "\""));
  }
  return result;
}

absl::StatusOr<std::vector<int32_t>> FrameLabels(
    absl::Span<const PhoneSegment> segments, int num_frames,
    double frame_shift_seconds, double frame_length_seconds) {
  if (segments.empty()) {
    return absl::InvalidArgumentError("no phone segments to label frames with");
  }
  std::vector<int> classes(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    absl::StatusOr<int> id = PhoneClassId(segments[i].phone);
    if (!id.ok()) return id.status();
    classes[i] = *id;
    if (i > 0 && segments[i].end_seconds < segments[i - 1].end_seconds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "phone segment ", i, " (\"", segments[i].phone, "\") ends at ",
          segments[i].end_seconds, " s, before the previous one"));
    }
  }
  std::vector<int32_t> labels(std::max(num_frames, 0));
  size_t s = 0;
  for (int t = 0; t < num_frames; ++t) {
    const double centre = t * frame_shift_seconds + 0.5 * frame_length_seconds;
    while (s + 1 < segments.size() && segments[s].end_seconds <= centre) ++s;
    labels[t] = classes[s];
  }
  return labels;
}

}  // namespace asgd::corpus
