// asgd_shrink: makes a trained model smaller, as a model file that the
// servers load as a warm start (asgd_server --init_model) and retrain.
//
//   asgd_shrink --model=final.mdl --out=small.mdl --factor=all --rank=256
//   asgd_shrink --model=final.mdl --out=small.mdl --factor=1,2,output:128
//       --energy=0.6   (one command line)
//
//   asgd_shrink --model=final.mdl --out=pruned.mdl --prune=0.7
//
//   asgd_shrink --model=final.mdl --out=multi.mdl --output_frames=3
//
// Low-rank factorization (shrink/low_rank.h): each layer named in --factor
// becomes a linear bottleneck of the chosen rank followed by the layer.
// Magnitude pruning (shrink/prune.h): the smallest weights become 0 and
// stay 0 while the servers retrain the model. Both: factoring first.
// Multi-frame heads (shrink/multi_frame.h): the model's output layer copied
// to --output_frames heads, each to learn the frame j ahead; last.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cli.h"
#include "common/status_macros.h"
#include "model/model_file.h"
#include "model/prune_mask.h"
#include "shrink/low_rank.h"
#include "shrink/multi_frame.h"
#include "shrink/prune.h"

ABSL_FLAG(std::string, model, "",
          "The trained model to shrink (a worker's --save_model, or this "
          "tool's output); required.");
ABSL_FLAG(std::string, out, "", "The model file to write; required.");
ABSL_FLAG(std::string, factor, "",
          "Layers to factor: comma-separated LAYER or LAYER:RANK, LAYER a "
          "hidden dense layer's index, 'output', or 'all' (every dense layer "
          "and the output layer; with --rank, not those whose full rank is at "
          "most --rank).");
ABSL_FLAG(int, rank, 0,
          "Rank of the layers --factor gives none (0: choose by --energy).");
ABSL_FLAG(double, energy, 0,
          "Instead of --rank: per layer the smallest rank whose singular "
          "values keep this share, in (0, 1], of the sum of their squares.");
ABSL_FLAG(double, prune, 0,
          "Prune this share, in [0, 1), of the weights with the smallest "
          "magnitude (0: none); the servers keep them at 0 in retraining.");
ABSL_FLAG(std::string, prune_scope, "global",
          "global: one threshold over every pruned tensor; tensor: the share "
          "of each tensor.");
ABSL_FLAG(std::string, prune_tensors, "",
          "Tensors to prune, comma-separated (e.g. layer0/weight); empty: "
          "every weight tensor (not the biases).");
ABSL_FLAG(int, output_frames, 1,
          "Make a multi-frame model of this many softmax heads (2 to 16; 1: "
          "none), each starting as a copy of the output layer; retraining "
          "teaches head j the label of the frame j ahead.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "asgd_shrink: %s\n", s.ToString().c_str());
  return 1;
}

// Factors the layers of --factor (if any) in *model.
absl::Status Factor(SavedModel* model) {
  const std::string factor = absl::GetFlag(FLAGS_factor);
  const int rank = absl::GetFlag(FLAGS_rank);
  const double energy = absl::GetFlag(FLAGS_energy);
  if (factor.empty()) {
    if (rank != 0 || energy != 0) {
      return absl::InvalidArgumentError("--rank and --energy need --factor");
    }
    return absl::OkStatus();
  }
  if (rank < 0 || (rank > 0 && energy != 0)) {
    return absl::InvalidArgumentError(
        "give one of --rank (>= 1) and --energy (in (0, 1]), or a rank for "
        "every --factor item");
  }
  if (!model->pruned.empty()) {
    return absl::InvalidArgumentError(
        "the model is pruned; factor the dense model, then prune");
  }
  ASGD_ASSIGN_OR_RETURN(std::vector<LayerRank> layers,
                        ParseLayerRanks(factor, model->spec, rank, energy));
  std::printf("asgd_shrink: factoring %zu layers\n", layers.size());
  std::fflush(stdout);
  ASGD_ASSIGN_OR_RETURN(LowRankResult result,
                        FactorLowRank(model->spec, model->params, layers));
  for (const FactoredLayer& f : result.layers) {
    std::printf(
        "  layer %d (%lld x %lld): rank %d of %lld, energy kept %.4f, "
        "relative error %.4f, %lld -> %lld parameters\n",
        f.layer, static_cast<long long>(f.units),
        static_cast<long long>(f.inputs), f.rank,
        static_cast<long long>(std::min(f.units, f.inputs)), f.kept_energy,
        f.relative_error, static_cast<long long>(f.params_before),
        static_cast<long long>(f.params_after));
  }
  *model = std::move(result.model);
  return absl::OkStatus();
}

// Prunes *model by --prune (if > 0).
absl::Status Prune(SavedModel* model) {
  PruneOptions options;
  options.sparsity = absl::GetFlag(FLAGS_prune);
  const std::string scope = absl::GetFlag(FLAGS_prune_scope);
  if (scope != "global" && scope != "tensor") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prune_scope must be global or tensor, not '", scope, "'"));
  }
  options.per_tensor = scope == "tensor";
  options.tensors = absl::StrSplit(absl::GetFlag(FLAGS_prune_tensors), ',',
                                   absl::SkipEmpty());
  if (options.sparsity == 0) {
    if (!options.tensors.empty()) {
      return absl::InvalidArgumentError("--prune_tensors needs --prune");
    }
    return absl::OkStatus();
  }
  ASGD_ASSIGN_OR_RETURN(PruneResult result, PruneByMagnitude(*model, options));
  for (const PrunedTensor& t : result.tensors) {
    std::printf("  %s: %lld of %lld weights pruned (%.1f%%)\n",
                t.name.c_str(), static_cast<long long>(t.pruned),
                static_cast<long long>(t.size), 100.0 * t.pruned / t.size);
  }
  std::printf("asgd_shrink: %lld of %lld parameters pruned (%.1f%%)\n",
              static_cast<long long>(result.pruned),
              static_cast<long long>(result.params),
              100.0 * result.pruned / result.params);
  *model = std::move(result.model);
  return absl::OkStatus();
}

int Run() {
  const std::string in = absl::GetFlag(FLAGS_model);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int output_frames = absl::GetFlag(FLAGS_output_frames);
  if (in.empty() || out.empty() ||
      (absl::GetFlag(FLAGS_factor).empty() && absl::GetFlag(FLAGS_prune) == 0 &&
       output_frames == 1)) {
    return Fail(absl::InvalidArgumentError(
        "--model, --out and --factor, --prune or --output_frames are "
        "required (see --help)"));
  }
  absl::StatusOr<SavedModel> model = LoadModel(in);
  if (!model.ok()) return Fail(model.status());
  const int64_t before = ModelParamCount(model->spec);
  std::printf("asgd_shrink: %s: %s, %lld parameters\n", in.c_str(),
              DescribeModel(model->spec).c_str(),
              static_cast<long long>(before));
  if (absl::Status s = Factor(&*model); !s.ok()) return Fail(s);
  if (absl::Status s = Prune(&*model); !s.ok()) return Fail(s);
  if (output_frames != 1) {
    absl::StatusOr<SavedModel> multi = ToMultiFrame(*model, output_frames);
    if (!multi.ok()) return Fail(multi.status());
    *model = *std::move(multi);
  }
  if (absl::Status s = SaveModel(out, model->spec, model->params,
                                 model->pruned);
      !s.ok()) {
    return Fail(s);
  }
  const int64_t after = ModelParamCount(model->spec);
  const int64_t zeros = CountPruned(
      KeepMask(model->spec, model->params, model->pruned));
  std::printf(
      "asgd_shrink: wrote %s: %s, %lld parameters (%.1f%% of %lld), %lld "
      "of them pruned: %lld non-zero (%.1f%%)\n",
      out.c_str(), DescribeModel(model->spec).c_str(),
      static_cast<long long>(after), 100.0 * after / before,
      static_cast<long long>(before), static_cast<long long>(zeros),
      static_cast<long long>(after - zeros), 100.0 * (after - zeros) / before);
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd shrink: a smaller model from a trained one, for retraining "
      "through the servers (asgd_server --init_model).\nExample: asgd_shrink "
      "--model=final.mdl --out=small.mdl --factor=all --energy=0.6 "
      "--prune=0.5\n         asgd_shrink --model=final.mdl --out=multi.mdl "
      "--output_frames=3");
  return asgd::Run();
}
