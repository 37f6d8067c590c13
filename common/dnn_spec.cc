#include "common/dnn_spec.h"

#include <cmath>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace asgd {

absl::StatusOr<Activation> ParseActivation(absl::string_view text) {
  if (text == "sigmoid") return Activation::kSigmoid;
  if (text == "relu") return Activation::kRelu;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown activation '", text, "' (want sigmoid or relu)"));
}

absl::string_view ActivationName(Activation a) {
  return a == Activation::kSigmoid ? "sigmoid" : "relu";
}

absl::StatusOr<std::vector<int>> ParseLayerSizes(absl::string_view text) {
  std::vector<int> sizes;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return sizes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad layer size '", part, "' in '", text,
          "' (want comma-separated positive integers, e.g. 512,512)"));
    }
    sizes.push_back(v);
  }
  return sizes;
}

absl::Status ValidateDnnSpec(const DnnSpec& spec) {
  if (spec.input_dim <= 0 || spec.num_classes <= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("input_dim must be > 0 and num_classes > 1, got ",
                     spec.input_dim, " and ", spec.num_classes));
  }
  for (int h : spec.hidden) {
    if (h <= 0) return absl::InvalidArgumentError("hidden sizes must be > 0");
  }
  return absl::OkStatus();
}

std::vector<TensorSpec> DnnTensors(const DnnSpec& spec) {
  std::vector<TensorSpec> tensors;
  for (int l = 0; l < spec.num_layers(); ++l) {
    tensors.push_back({absl::StrCat("layer", l, "/weight"),
                       {spec.layer_out(l), spec.layer_in(l)}});
    tensors.push_back({absl::StrCat("layer", l, "/bias"), {spec.layer_out(l)}});
  }
  return tensors;
}

std::vector<float> InitialDnnParams(const DnnSpec& spec, uint64_t seed) {
  std::vector<float> params;
  for (int l = 0; l < spec.num_layers(); ++l) {
    const int in = spec.layer_in(l);
    const int out = spec.layer_out(l);
    double limit = std::sqrt(6.0 / (in + out));
    if (spec.activation == Activation::kSigmoid) limit *= 4.0;
    std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(l));
    std::uniform_real_distribution<float> dist(-limit, limit);
    for (int64_t i = 0; i < int64_t{in} * out; ++i) params.push_back(dist(rng));
    params.insert(params.end(), out, 0.0f);
  }
  return params;
}

}  // namespace asgd
