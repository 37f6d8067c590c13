#include "worker/model_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/dnn.h"

namespace asgd {

absl::Status SaveModel(const std::string& path, const DnnSpec& spec,
                       absl::Span<const float> params) {
  if (static_cast<int64_t>(params.size()) != DnnParamCount(spec)) {
    return absl::InvalidArgumentError("parameter count does not match spec");
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    out << "asgd-model 1\nactivation " << ActivationName(spec.activation) << "\n";
    for (const TensorSpec& t : DnnTensors(spec)) {
      out << "tensor " << t.name;
      for (int64_t d : t.shape) out << " " << d;
      out << "\n";
    }
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
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("model ", path, ": ", what));
  };
  std::string line;
  if (!std::getline(in, line) || line != "asgd-model 1") {
    return bad("not an asgd model file (first line must be 'asgd-model 1')");
  }
  std::vector<TensorSpec> tensors;
  std::string activation = "relu";
  int64_t count = -1;
  while (count < 0 && std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.empty()) continue;
    if (f[0] == "activation" && f.size() == 2) {
      activation = f[1];
    } else if (f[0] == "tensor" && f.size() >= 3) {
      TensorSpec t{f[1], {}};
      for (size_t i = 2; i < f.size(); ++i) {
        int64_t d = 0;
        if (!absl::SimpleAtoi(f[i], &d) || d <= 0) return bad("bad dimension in: " + line);
        t.shape.push_back(d);
      }
      tensors.push_back(std::move(t));
    } else if (f[0] == "data" && f.size() == 2) {
      if (!absl::SimpleAtoi(f[1], &count) || count < 0) return bad("bad data line");
    } else {
      return bad("unexpected line: " + line);
    }
  }
  if (count < 0) return bad("missing 'data' line");
  SavedModel model;
  ASGD_ASSIGN_OR_RETURN(model.spec.activation, ParseActivation(activation));
  if (tensors.size() < 2 || tensors.size() % 2 != 0 ||
      tensors[0].shape.size() != 2) {
    return bad("tensors do not describe a DNN");
  }
  model.spec.input_dim = static_cast<int>(tensors[0].shape[1]);
  model.spec.hidden.clear();
  const size_t layers = tensors.size() / 2;
  for (size_t l = 0; l + 1 < layers; ++l) {
    model.spec.hidden.push_back(static_cast<int>(tensors[2 * l].shape[0]));
  }
  model.spec.num_classes = static_cast<int>(tensors[2 * (layers - 1)].shape[0]);
  const std::vector<TensorSpec> want = DnnTensors(model.spec);
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].name != tensors[i].name || want[i].shape != tensors[i].shape) {
      return bad(absl::StrCat("tensor ", i, " is not the expected ", want[i].name));
    }
  }
  if (count != DnnParamCount(model.spec)) {
    return bad(absl::StrCat("data has ", count, " floats, tensors need ",
                            DnnParamCount(model.spec)));
  }
  model.params.resize(count);
  in.read(reinterpret_cast<char*>(model.params.data()), count * sizeof(float));
  if (in.gcount() != static_cast<std::streamsize>(count * sizeof(float))) {
    return bad("truncated data");
  }
  if (in.peek() != EOF) return bad("trailing bytes after the data");
  return model;
}

}  // namespace asgd
