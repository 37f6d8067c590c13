#include "corpus/features.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd::corpus {
namespace {

constexpr double kPi = 3.14159265358979323846;

double RefMel(double hz) { return 1127.0 * std::log(1.0 + hz / 700.0); }
double RefMelToHz(double mel) { return 700.0 * (std::exp(mel / 1127.0) - 1.0); }

// The whole pipeline of features.h written out the slow, obvious way, in
// double precision with an O(N^2) DFT.
std::vector<double> ReferenceFilterbank(const std::vector<float>& signal,
                                        const FilterbankOptions& o) {
  const int n = o.frame_length;
  const int num_frames =
      signal.size() < static_cast<size_t>(n)
          ? 0
          : 1 + static_cast<int>((signal.size() - n) / o.frame_shift);
  const int num_fft_bins = o.fft_size / 2 + 1;
  const double mel_low = RefMel(o.low_freq);
  const double mel_high = RefMel(o.high_freq);
  const double delta = (mel_high - mel_low) / (o.num_bins + 1);
  std::vector<double> out;
  for (int t = 0; t < num_frames; ++t) {
    std::vector<double> x(signal.begin() + t * o.frame_shift,
                          signal.begin() + t * o.frame_shift + n);
    if (o.preemphasis > 0) {
      std::vector<double> y(n);
      y[0] = x[0] - o.preemphasis * x[0];
      for (int i = 1; i < n; ++i) y[i] = x[i] - o.preemphasis * x[i - 1];
      x = y;
    }
    for (int i = 0; i < n; ++i) {
      const double c = std::cos(2 * kPi * i / (n - 1));
      x[i] *= o.window == WindowType::kHamming ? 0.54 - 0.46 * c
                                               : std::pow(0.5 - 0.5 * c, 0.85);
    }
    std::vector<double> power(num_fft_bins);
    for (int k = 0; k < num_fft_bins; ++k) {
      double re = 0, im = 0;
      for (int i = 0; i < n; ++i) {  // zero padding beyond n adds nothing
        re += x[i] * std::cos(2 * kPi * k * i / o.fft_size);
        im -= x[i] * std::sin(2 * kPi * k * i / o.fft_size);
      }
      power[k] = re * re + im * im;
    }
    for (int b = 0; b < o.num_bins; ++b) {
      const double left = mel_low + b * delta, centre = left + delta,
                   right = centre + delta;
      double energy = 0;
      for (int k = 0; k < num_fft_bins; ++k) {
        const double mel =
            RefMel(static_cast<double>(k) * o.sample_rate / o.fft_size);
        double w = 0;
        if (mel > left && mel <= centre) w = (mel - left) / (centre - left);
        if (mel > centre && mel < right) w = (right - mel) / (right - centre);
        energy += w * power[k];
      }
      out.push_back(std::log(std::max(energy, 1e-10)));
    }
  }
  return out;
}

std::vector<float> RandomSignal(int length, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  std::vector<float> signal(length);
  // White noise plus a few random sinusoids, so the spectrum is not flat.
  std::uniform_real_distribution<float> freq(50.0f, 7900.0f);
  const float f1 = freq(rng), f2 = freq(rng);
  for (int i = 0; i < length; ++i) {
    signal[i] = uniform(rng) + 0.3f * std::sin(2 * kPi * f1 * i / 16000) +
                0.2f * std::sin(2 * kPi * f2 * i / 16000 + 1.0);
  }
  return signal;
}

std::unique_ptr<FilterbankExtractor> MakeExtractor(
    const FilterbankOptions& options) {
  absl::StatusOr<std::unique_ptr<FilterbankExtractor>> extractor =
      FilterbankExtractor::Create(options);
  EXPECT_TRUE(extractor.ok()) << extractor.status();
  return extractor.ok() ? *std::move(extractor) : nullptr;
}

struct Variant {
  WindowType window;
  float preemphasis;
};

class FeaturesReferenceTest : public ::testing::TestWithParam<Variant> {};

// Log energies of the fftw3f implementation match the double-precision DFT
// reference to within 1e-3 (a relative energy error of 0.1%).
TEST_P(FeaturesReferenceTest, MatchesNaiveDft) {
  constexpr double kTolerance = 1e-3;
  FilterbankOptions options;
  options.window = GetParam().window;
  options.preemphasis = GetParam().preemphasis;
  std::unique_ptr<FilterbankExtractor> extractor = MakeExtractor(options);
  ASSERT_NE(extractor, nullptr);
  for (unsigned seed : {1u, 2u, 3u}) {
    const std::vector<float> signal = RandomSignal(400 + 160 * 4 + 37, seed);
    const std::vector<float> features = extractor->Compute(signal);
    const std::vector<double> reference = ReferenceFilterbank(signal, options);
    ASSERT_EQ(features.size(), 5u * 40u);
    ASSERT_EQ(features.size(), reference.size());
    for (size_t i = 0; i < features.size(); ++i) {
      EXPECT_NEAR(features[i], reference[i], kTolerance)
          << "seed " << seed << ", frame " << i / 40 << ", bin " << i % 40;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, FeaturesReferenceTest,
                         ::testing::Values(Variant{WindowType::kHamming, 0.97f},
                                           Variant{WindowType::kHamming, 0.0f},
                                           Variant{WindowType::kPovey, 0.97f}));

TEST(FeaturesTest, PureToneLandsInItsMelBand) {
  FilterbankOptions options;
  options.preemphasis = 0;  // keeps the tone's band the loudest by far
  std::unique_ptr<FilterbankExtractor> extractor = MakeExtractor(options);
  ASSERT_NE(extractor, nullptr);
  const double mel_low = RefMel(20), mel_high = RefMel(7600);
  const double delta = (mel_high - mel_low) / 41;
  for (int band : {2, 10, 20, 30, 39}) {
    const double hz = RefMelToHz(mel_low + (band + 1) * delta);
    std::vector<float> tone(16000);
    for (size_t i = 0; i < tone.size(); ++i) {
      tone[i] = 0.5f * std::sin(2 * kPi * hz * i / 16000);
    }
    const std::vector<float> features = extractor->Compute(tone);
    const int frame = 50;
    const auto begin = features.begin() + frame * 40;
    const int peak = std::max_element(begin, begin + 40) - begin;
    EXPECT_EQ(peak, band) << "tone at " << hz << " Hz";
  }
}

TEST(FeaturesTest, SilenceGivesTheFloor) {
  std::unique_ptr<FilterbankExtractor> extractor =
      MakeExtractor(FilterbankOptions());
  ASSERT_NE(extractor, nullptr);
  const std::vector<float> features =
      extractor->Compute(std::vector<float>(800, 0.0f));
  ASSERT_EQ(features.size(), 3u * 40u);
  for (float f : features) EXPECT_FLOAT_EQ(f, std::log(1e-10f));
}

TEST(FeaturesTest, NumFramesCountsWholeFrames) {
  std::unique_ptr<FilterbankExtractor> extractor =
      MakeExtractor(FilterbankOptions());
  ASSERT_NE(extractor, nullptr);
  EXPECT_EQ(extractor->NumFrames(0), 0);
  EXPECT_EQ(extractor->NumFrames(399), 0);
  EXPECT_EQ(extractor->NumFrames(400), 1);
  EXPECT_EQ(extractor->NumFrames(559), 1);
  EXPECT_EQ(extractor->NumFrames(560), 2);
  EXPECT_EQ(extractor->NumFrames(16000), 98);
  EXPECT_TRUE(extractor->Compute(std::vector<float>(399, 1.0f)).empty());
}

TEST(FeaturesTest, FiltersAreTrianglesCoveringTheRange) {
  std::unique_ptr<FilterbankExtractor> extractor =
      MakeExtractor(FilterbankOptions());
  ASSERT_NE(extractor, nullptr);
  const std::vector<float> dense = extractor->DenseFilters();
  ASSERT_EQ(dense.size(), 40u * 257u);
  for (int b = 0; b < 40; ++b) {
    const auto row = dense.begin() + b * 257;
    const float peak = *std::max_element(row, row + 257);
    EXPECT_GT(peak, 0.3f) << "band " << b;
    EXPECT_LE(peak, 1.0f) << "band " << b;
  }
  // No weight outside 20-7600 Hz: bin 0 (0 Hz) and bins above 7600 Hz.
  for (int b = 0; b < 40; ++b) {
    EXPECT_EQ(dense[b * 257], 0.0f);
    for (int k = 244; k < 257; ++k) EXPECT_EQ(dense[b * 257 + k], 0.0f);
  }
}

TEST(FeaturesTest, CreateRejectsBadOptions) {
  FilterbankOptions small_fft;
  small_fft.fft_size = 256;
  FilterbankOptions above_nyquist;
  above_nyquist.high_freq = 9000;
  FilterbankOptions too_many_bins;
  too_many_bins.num_bins = 200;
  FilterbankOptions bad_preemphasis;
  bad_preemphasis.preemphasis = 1.5f;
  for (const FilterbankOptions& o :
       {small_fft, above_nyquist, too_many_bins, bad_preemphasis}) {
    EXPECT_EQ(FilterbankExtractor::Create(o).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(FeaturesTest, SubtractMeanCentresEachDimension) {
  std::vector<float> features = {1, 10, 3, 20, 5, 60};  // 3 frames, dim 2
  ASSERT_TRUE(SubtractMean(2, &features).ok());
  EXPECT_THAT(features, ::testing::ElementsAre(-2, -20, 0, -10, 2, 30));
  std::vector<float> empty;
  EXPECT_TRUE(SubtractMean(2, &empty).ok());
  std::vector<float> ragged = {1, 2, 3};
  EXPECT_EQ(SubtractMean(2, &ragged).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ragged, ::testing::ElementsAre(1, 2, 3));
}

TEST(FeaturesTest, MelScaleRoundTrips) {
  for (float hz : {0.0f, 20.0f, 700.0f, 7600.0f}) {
    EXPECT_NEAR(MelToHz(HzToMel(hz)), hz, 1e-2f);
  }
  EXPECT_NEAR(HzToMel(700), 1127 * std::log(2.0), 1e-3);
}

}  // namespace
}  // namespace asgd::corpus
