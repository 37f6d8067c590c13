#include "model/model_file.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "model/model_spec_proto.h"
#include "model/prune_mask.h"

namespace asgd {
namespace {

// Index of the first non-finite value, or -1.
int64_t FirstNonFinite(absl::Span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

// The DNN a version-1 file describes (tensors layer<i>/weight, layer<i>/bias).
absl::StatusOr<ModelSpec> DnnFromVersion1(const std::vector<TensorSpec>& tensors,
                                          Activation activation) {
  if (tensors.size() < 2 || tensors.size() % 2 != 0 ||
      tensors[0].shape.size() != 2) {
    return absl::InvalidArgumentError("tensors do not describe a DNN");
  }
  ModelSpec spec;
  const int64_t input = tensors[0].shape[1];
  spec.context = input % 11 == 0 ? 5 : 0;
  spec.feature_dim = static_cast<int>(spec.context == 5 ? input / 11 : input);
  const size_t layers = tensors.size() / 2;
  for (size_t l = 0; l + 1 < layers; ++l) {
    spec.layers.push_back(LayerSpec::Dense(
        static_cast<int>(tensors[2 * l].shape[0]), activation));
  }
  spec.num_classes = static_cast<int>(tensors[2 * (layers - 1)].shape[0]);
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  return spec;
}

}  // namespace

absl::Status SaveModel(const std::string& path, const ModelSpec& spec,
                       absl::Span<const float> params,
                       absl::Span<const std::string> pruned) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  ASGD_RETURN_IF_ERROR(CheckPrunedTensors(spec, pruned));
  if (static_cast<int64_t>(params.size()) != ModelParamCount(spec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", params.size(), " parameters, its spec ",
                     ModelParamCount(spec)));
  }
  if (const int64_t bad = FirstNonFinite(params); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter ", bad, " is not finite; not saved"));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    out << "asgd-model 2\nspec " << ModelSpecToText(spec) << "\n";
    for (const TensorSpec& t : ModelTensors(spec)) {
      out << "tensor " << t.name;
      for (int64_t d : t.shape) out << " " << d;
      out << "\n";
    }
    for (const std::string& name : pruned) out << "pruned " << name << "\n";
    out << "data " << params.size() << "\n";
    out.write(reinterpret_cast<const char*>(params.data()),
              params.size() * sizeof(float));
    if (!out.flush()) return absl::DataLossError(absl::StrCat("write failed: ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<SavedModel> LoadModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open model ", path));
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("model ", path, ": ", what));
  };
  // Header lines are short; a line past this is not a header.
  constexpr size_t kMaxLine = 1 << 20;
  auto read_line = [&](std::string* line) {
    line->clear();
    char c;
    while (in.get(c) && c != '\n') {
      if (line->size() >= kMaxLine) return false;
      line->push_back(c);
    }
    return static_cast<bool>(in) || !line->empty();
  };
  std::string line;
  int version = 0;
  if (read_line(&line)) {
    if (line == "asgd-model 1") version = 1;
    if (line == "asgd-model 2") version = 2;
  }
  if (version == 0) {
    return bad("not an asgd model file (first line must be 'asgd-model 2')");
  }
  std::vector<TensorSpec> tensors;
  std::string spec_text;
  Activation activation = Activation::kRelu;
  int64_t count = -1;
  std::vector<std::string> pruned;
  while (count < 0 && read_line(&line)) {
    if (version == 2 && absl::StartsWith(line, "spec ")) {
      spec_text = line.substr(5);
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.empty()) continue;
    if (version == 1 && f[0] == "activation" && f.size() == 2) {
      auto parsed = ParseActivation(f[1]);
      if (!parsed.ok()) return bad(parsed.status().message());
      activation = *parsed;
    } else if (f[0] == "tensor" && f.size() >= 3 && tensors.size() < 4096) {
      TensorSpec t{f[1], {}};
      for (size_t i = 2; i < f.size(); ++i) {
        int64_t d = 0;
        if (!absl::SimpleAtoi(f[i], &d) || d <= 0 || d > (int64_t{1} << 31)) {
          return bad("bad dimension in: " + line.substr(0, 200));
        }
        t.shape.push_back(d);
      }
      tensors.push_back(std::move(t));
    } else if (version == 2 && f[0] == "pruned" && f.size() == 2 &&
               pruned.size() < 4096) {
      pruned.push_back(f[1]);
    } else if (f[0] == "data" && f.size() == 2) {
      if (!absl::SimpleAtoi(f[1], &count) || count < 0) return bad("bad data line");
    } else {
      return bad("unexpected line: " + line.substr(0, 200));
    }
  }
  if (count < 0) return bad("missing 'data' line");
  SavedModel model;
  if (version == 2) {
    if (spec_text.empty()) return bad("missing 'spec' line");
    auto spec = ParseModelConfig(spec_text);
    if (!spec.ok()) return bad(spec.status().message());
    model.spec = *spec;
  } else {
    auto spec = DnnFromVersion1(tensors, activation);
    if (!spec.ok()) return bad(spec.status().message());
    model.spec = *spec;
  }
  const std::vector<TensorSpec> want = ModelTensors(model.spec);
  if (want.size() != tensors.size()) {
    return bad(absl::StrCat(tensors.size(), " tensors listed, the spec has ",
                            want.size()));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].name != tensors[i].name || want[i].shape != tensors[i].shape) {
      return bad(absl::StrCat("tensor ", i, " is not the expected ", want[i].name));
    }
  }
  if (absl::Status s = CheckPrunedTensors(model.spec, pruned); !s.ok()) {
    return bad(s.message());
  }
  model.pruned = std::move(pruned);
  if (count != ModelParamCount(model.spec)) {
    return bad(absl::StrCat("data has ", count, " floats, tensors need ",
                            ModelParamCount(model.spec)));
  }
  model.params.resize(count);
  in.read(reinterpret_cast<char*>(model.params.data()), count * sizeof(float));
  if (in.gcount() != static_cast<std::streamsize>(count * sizeof(float))) {
    return bad("truncated data");
  }
  if (in.peek() != EOF) return bad("trailing bytes after the data");
  if (const int64_t i = FirstNonFinite(model.params); i >= 0) {
    return bad(absl::StrCat("parameter ", i, " is not finite"));
  }
  return model;
}

}  // namespace asgd
