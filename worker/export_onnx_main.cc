// asgd_export_onnx: writes a trained model (a saved file, or the model on a
// server pool now) as an ONNX model that takes one utterance's input rows
// and gives their log-posteriors; see model/onnx_export.h for the graph.
//
//   asgd_export_onnx --model=exp/asgd/final.mdl --out=exp/asgd/final.onnx
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/security_flags.h"
#include "model/onnx_export.h"
#include "worker/model_source.h"

ABSL_FLAG(std::string, model, "", "A model saved with --save_model.");
ABSL_FLAG(std::string, servers, "",
          "Instead of --model: the model on this pool now (host:port,...).");
ABSL_FLAG(std::string, out, "", "The ONNX file to write (required).");
ABSL_FLAG(int, connect_timeout_s, 30, "Seconds to wait for the servers.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "asgd_export_onnx: %s\n", s.ToString().c_str());
  return 1;
}

int Run() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Fail(absl::InvalidArgumentError("--out is required"));
  auto security = SecurityOptionsFromFlags();
  if (!security.ok()) return Fail(security.status());
  auto loaded = LoadModelFrom(
      absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_servers), *security,
      absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s)));
  if (!loaded.ok()) return Fail(loaded.status());
  const ModelSpec& spec = loaded->model.spec;
  if (absl::Status s = WriteOnnxModel(out, spec, loaded->model.params);
      !s.ok()) {
    return Fail(s);
  }
  std::printf(
      "asgd_export_onnx: %s (%s) -> %s: input \"%s\" [frames, %d], output "
      "\"%s\" [frames, %d]; checked by the ONNX checker\n",
      loaded->source.c_str(), DescribeModel(spec).c_str(), out.c_str(),
      kOnnxInputName, spec.input_dim(), kOnnxOutputName, spec.output_dim());
  if (spec.output_frames > 1) {
    std::printf("asgd_export_onnx: each row holds %d heads of %d classes, "
                "head j scoring the row's frame + j; a decoder feeds one row "
                "in %d\n",
                spec.output_frames, spec.num_classes, spec.output_frames);
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd export_onnx: a trained model as ONNX (one utterance's input rows "
      "in, log-posteriors out).\nExample: asgd_export_onnx --model=final.mdl "
      "--out=final.onnx");
  return asgd::Run();
}
