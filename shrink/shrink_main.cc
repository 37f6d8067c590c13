// asgd_shrink: makes a trained model smaller, as a model file that the
// servers load as a warm start (asgd_server --init_model) and retrain.
//
//   asgd_shrink --model=final.mdl --out=small.mdl --factor=all --rank=256
//   asgd_shrink --model=final.mdl --out=small.mdl --factor=1,2,output:128 \
//       --energy=0.6
//
// Low-rank factorization (shrink/low_rank.h): each layer named in --factor
// becomes a linear bottleneck of the chosen rank followed by the layer.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/cli.h"
#include "model/model_file.h"
#include "shrink/low_rank.h"

ABSL_FLAG(std::string, model, "",
          "The trained model to shrink (a worker's --save_model, or this "
          "tool's output); required.");
ABSL_FLAG(std::string, out, "", "The model file to write; required.");
ABSL_FLAG(std::string, factor, "",
          "Layers to factor: comma-separated LAYER or LAYER:RANK, LAYER a "
          "hidden dense layer's index, 'output', or 'all' (every dense layer "
          "and the output layer). Required.");
ABSL_FLAG(int, rank, 0,
          "Rank of the layers --factor gives none (0: choose by --energy).");
ABSL_FLAG(double, energy, 0,
          "Instead of --rank: per layer the smallest rank whose singular "
          "values keep this share, in (0, 1], of the sum of their squares.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "asgd_shrink: %s\n", s.ToString().c_str());
  return 1;
}

int Run() {
  const std::string in = absl::GetFlag(FLAGS_model);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int rank = absl::GetFlag(FLAGS_rank);
  const double energy = absl::GetFlag(FLAGS_energy);
  if (in.empty() || out.empty() || absl::GetFlag(FLAGS_factor).empty()) {
    return Fail(absl::InvalidArgumentError(
        "--model, --out and --factor are required (see --help)"));
  }
  if (rank < 0 || (rank > 0 && energy != 0)) {
    return Fail(absl::InvalidArgumentError(
        "give one of --rank (>= 1) and --energy (in (0, 1]), or a rank for "
        "every --factor item"));
  }
  absl::StatusOr<SavedModel> model = LoadModel(in);
  if (!model.ok()) return Fail(model.status());
  auto layers = ParseLayerRanks(absl::GetFlag(FLAGS_factor), model->spec,
                                rank, energy);
  if (!layers.ok()) return Fail(layers.status());
  std::printf("asgd_shrink: %s: %s, %lld parameters; factoring %zu layers\n",
              in.c_str(), DescribeModel(model->spec).c_str(),
              static_cast<long long>(ModelParamCount(model->spec)),
              layers->size());
  std::fflush(stdout);
  auto result = FactorLowRank(model->spec, model->params, *layers);
  if (!result.ok()) return Fail(result.status());
  for (const FactoredLayer& f : result->layers) {
    std::printf(
        "  layer %d (%lld x %lld): rank %d of %lld, energy kept %.4f, "
        "relative error %.4f, %lld -> %lld parameters\n",
        f.layer, static_cast<long long>(f.units),
        static_cast<long long>(f.inputs), f.rank,
        static_cast<long long>(std::min(f.units, f.inputs)), f.kept_energy,
        f.relative_error, static_cast<long long>(f.params_before),
        static_cast<long long>(f.params_after));
  }
  const SavedModel& small = result->model;
  if (absl::Status s = SaveModel(out, small.spec, small.params); !s.ok()) {
    return Fail(s);
  }
  const int64_t before = ModelParamCount(model->spec);
  const int64_t after = ModelParamCount(small.spec);
  std::printf("asgd_shrink: wrote %s: %s, %lld parameters (%.1f%% of %lld)\n",
              out.c_str(), DescribeModel(small.spec).c_str(),
              static_cast<long long>(after), 100.0 * after / before,
              static_cast<long long>(before));
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd shrink: a smaller model from a trained one, for retraining "
      "through the servers (asgd_server --init_model).\nExample: asgd_shrink "
      "--model=final.mdl --out=small.mdl --factor=all --energy=0.6");
  return asgd::Run();
}
