#include "corpus/synth.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "corpus/phone_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd::corpus {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr char kSentence[] = "You may copy and distribute the program";

std::unique_ptr<Synthesizer> MakeSynthesizer(
    const std::vector<std::string>& voices) {
  absl::StatusOr<std::unique_ptr<Synthesizer>> synth =
      Synthesizer::Create(voices);
  EXPECT_TRUE(synth.ok()) << synth.status();
  return synth.ok() ? *std::move(synth) : nullptr;
}

class SynthVoiceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthVoiceTest, SentenceGivesAudioAndTimedPhones) {
  std::unique_ptr<Synthesizer> synth = MakeSynthesizer({GetParam()});
  ASSERT_NE(synth, nullptr);
  absl::StatusOr<Synthesis> s = synth->Synthesize(kSentence, GetParam(), 1.0f);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sample_rate, 16000);
  const double seconds = s->samples.size() / 16000.0;
  EXPECT_GT(seconds, 1.0);
  EXPECT_LT(seconds, 6.0);
  ASSERT_GT(s->segments.size(), 10u);
  // Audible: not all zeros.
  int loud = 0;
  for (int16_t x : s->samples) loud += std::abs(x) > 1000;
  EXPECT_GT(loud, 1000);
  // End times increase and the last one is the end of the audio.
  for (size_t i = 1; i < s->segments.size(); ++i) {
    EXPECT_GE(s->segments[i].end_seconds, s->segments[i - 1].end_seconds)
        << "segment " << i;
  }
  EXPECT_GT(s->segments.front().end_seconds, 0);
  // kal16 cuts the final silence short by about 0.1 s.
  EXPECT_NEAR(s->segments.back().end_seconds, seconds, 0.15);
  // Silence at both ends.
  EXPECT_EQ(s->segments.front().phone, "pau");
  EXPECT_EQ(s->segments.back().phone, "pau");

  const int num_frames = static_cast<int>((s->samples.size() - 400) / 160 + 1);
  absl::StatusOr<std::vector<int32_t>> labels =
      FrameLabels(s->segments, num_frames, 0.010, 0.025);
  ASSERT_TRUE(labels.ok()) << labels.status();
  ASSERT_EQ(labels->size(), static_cast<size_t>(num_frames));
  for (int32_t label : *labels) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, kNumPhoneClasses);
  }
  EXPECT_EQ(labels->front(), kSilenceClass);
  EXPECT_EQ(labels->back(), kSilenceClass);
  int speech_frames = 0;
  for (int32_t label : *labels) speech_frames += label != kSilenceClass;
  EXPECT_GT(speech_frames, num_frames / 2);
}

INSTANTIATE_TEST_SUITE_P(AllVoices, SynthVoiceTest,
                         ::testing::Values("kal16", "awb", "rms", "slt"));

TEST(SynthTest, DurationStretchSlowsSpeech) {
  std::unique_ptr<Synthesizer> synth = MakeSynthesizer({"kal16", "slt"});
  ASSERT_NE(synth, nullptr);
  for (const char* voice : {"kal16", "slt"}) {
    absl::StatusOr<Synthesis> normal =
        synth->Synthesize(kSentence, voice, 1.0f);
    absl::StatusOr<Synthesis> slow = synth->Synthesize(kSentence, voice, 1.5f);
    absl::StatusOr<Synthesis> again = synth->Synthesize(kSentence, voice, 1.0f);
    absl::StatusOr<Synthesis> other_seed =
        synth->Synthesize(kSentence, voice, 1.0f, /*random_seed=*/2);
    ASSERT_TRUE(normal.ok() && slow.ok() && again.ok() && other_seed.ok());
    const double ratio =
        static_cast<double>(slow->samples.size()) / normal->samples.size();
    EXPECT_GT(ratio, 1.3) << voice;
    EXPECT_LT(ratio, 1.7) << voice;
    // The stretch does not stick to the voice, and synthesis depends only on
    // the arguments.
    EXPECT_EQ(again->samples, normal->samples) << voice;
    EXPECT_EQ(other_seed->samples.size(), normal->samples.size()) << voice;
  }
}

TEST(SynthTest, OneSynthesizerPerProcess) {
  std::unique_ptr<Synthesizer> first = MakeSynthesizer({"kal16"});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Synthesizer::Create({"kal16"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  first.reset();
  EXPECT_NE(MakeSynthesizer({"kal16"}), nullptr);
}

TEST(SynthTest, RejectsBadRequests) {
  EXPECT_EQ(Synthesizer::Create({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status unknown = Synthesizer::Create({"kal"}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("unknown voice \"kal\""));
  EXPECT_EQ(Synthesizer::Create({"slt", "slt"}).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::unique_ptr<Synthesizer> synth = MakeSynthesizer({"kal16"});
  ASSERT_NE(synth, nullptr);
  EXPECT_EQ(synth->Synthesize("hello", "slt", 1.0f).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(synth->Synthesize("hello", "kal16", 0.1f).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(synth->Synthesize("hello", "kal16", NAN).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SynthTest, VoiceIndexFollowsKVoiceNames) {
  EXPECT_EQ(*VoiceIndex("kal16"), 0);
  EXPECT_EQ(*VoiceIndex("slt"), 3);
  EXPECT_FALSE(VoiceIndex("kal").ok());
}

TEST(FrameLabelsTest, FrameCentreDecides) {
  const std::vector<PhoneSegment> segments = {
      {"pau", 0.10f}, {"k", 0.15f}, {"ax", 0.30f}, {"pau", 0.40f}};
  // Frame t is centred at 0.0125 + 0.01 t seconds.
  absl::StatusOr<std::vector<int32_t>> labels =
      FrameLabels(segments, 42, 0.010, 0.025);
  ASSERT_TRUE(labels.ok()) << labels.status();
  const int pau = kSilenceClass, k = *PhoneClassId("k"),
            ah = *PhoneClassId("ah");
  std::vector<int32_t> expected;
  for (int t = 0; t < 42; ++t) {
    const double centre = 0.0125 + 0.01 * t;
    expected.push_back(centre < 0.10   ? pau
                       : centre < 0.15 ? k
                       : centre < 0.30 ? ah
                                       : pau);
  }
  EXPECT_THAT(*labels, ElementsAreArray(expected));
  EXPECT_EQ((*labels)[9], k);    // centre 0.1025
  EXPECT_EQ((*labels)[14], ah);  // centre 0.1525
}

TEST(FrameLabelsTest, FramesAfterTheLastSegmentTakeItsClass) {
  absl::StatusOr<std::vector<int32_t>> labels =
      FrameLabels({{"pau", 0.02f}, {"s", 0.05f}}, 10, 0.010, 0.025);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(labels->back(), *PhoneClassId("s"));
}

TEST(FrameLabelsTest, RejectsBadSegments) {
  EXPECT_EQ(FrameLabels({}, 5, 0.01, 0.025).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      FrameLabels({{"pau", 0.2f}, {"k", 0.1f}}, 5, 0.01, 0.025).status().code(),
      absl::StatusCode::kInvalidArgument);
  absl::Status unknown =
      FrameLabels({{"pau", 0.1f}, {"qq", 0.2f}}, 5, 0.01, 0.025).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("qq"));
}

}  // namespace
}  // namespace asgd::corpus
