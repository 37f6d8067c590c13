// asgd_eval: held-out frame accuracy of the model on the servers, or of a
// saved model.
//
//   asgd_eval --corpus=/tmp/corpus --servers=127.0.0.1:5001,127.0.0.1:5002
//   asgd_eval --corpus=/tmp/corpus --model=/tmp/model.asgd
//
// The last line printed is "held-out frame accuracy: NN.N%".
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/security_flags.h"
#include "corpus/corpus_io.h"
#include "worker/dnn.h"
#include "worker/frames.h"
#include "worker/grpc_param_client.h"
#include "worker/model_file.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, corpus, "", "Corpus directory (its held-out split is used).");
ABSL_FLAG(std::string, servers, "",
          "Evaluate the model currently on this pool (host:port,...).");
ABSL_FLAG(std::string, model, "", "Evaluate this saved model instead.");
ABSL_FLAG(int, context, 5, "Frames of context on each side (as in training).");
ABSL_FLAG(int, batch_size, 1024, "Frames per evaluation batch.");
ABSL_FLAG(int, connect_timeout_s, 30, "Seconds to wait for the servers.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "asgd_eval: %s\n", s.ToString().c_str());
  return 1;
}

int Run() {
  const std::string servers = absl::GetFlag(FLAGS_servers);
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (servers.empty() == model_path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "give exactly one of --servers and --model"));
  }
  auto corpus = corpus::LoadCorpus(absl::GetFlag(FLAGS_corpus));
  if (!corpus.ok()) return Fail(corpus.status());
  FrameData heldout(corpus->info, corpus->heldout, absl::GetFlag(FLAGS_context));

  DnnSpec spec;
  std::vector<float> params;
  std::string source;
  if (!model_path.empty()) {
    auto model = LoadModel(model_path);
    if (!model.ok()) return Fail(model.status());
    spec = model->spec;
    params = std::move(model->params);
    source = model_path;
  } else {
    auto addresses = ParseServerList(servers);
    if (!addresses.ok()) return Fail(addresses.status());
    GrpcClientOptions options;
    options.worker_id = 1u << 31;  // not a training worker
    auto security = SecurityOptionsFromFlags();
    if (!security.ok()) return Fail(security.status());
    options.security = *security;
    options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
    auto client = GrpcParamClient::Create(*addresses, options);
    if (!client.ok()) return Fail(client.status());
    auto pool_spec = DnnSpecFromPool(**client);
    if (!pool_spec.ok()) return Fail(pool_spec.status());
    spec = *pool_spec;
    params.resize((*client)->layout().total_size());
    std::vector<uint64_t> versions;
    if (absl::Status s = (*client)->Pull(absl::MakeSpan(params), &versions);
        !s.ok()) {
      return Fail(s);
    }
    source = "pool at version";
    for (uint64_t v : versions) source += " " + std::to_string(v);
  }
  // Another input size or class count: refuse rather than print a
  // meaningless accuracy.
  if (absl::Status s = CheckModelMatchesCorpus(spec, corpus->info,
                                               absl::GetFlag(FLAGS_context));
      !s.ok()) {
    return Fail(s);
  }
  auto backend = CreateCpuDnn(spec, absl::GetFlag(FLAGS_batch_size));
  if (!backend.ok()) return Fail(backend.status());
  auto accuracy = EvaluateAccuracy(backend->get(), params, heldout,
                                   absl::GetFlag(FLAGS_batch_size));
  if (!accuracy.ok()) return Fail(accuracy.status());
  std::printf("evaluated %s on %lld held-out frames (always-majority-class "
              "baseline %.1f%%)\n",
              source.c_str(), static_cast<long long>(heldout.num_frames()),
              100 * heldout.MajorityClassRate());
  std::printf("held-out frame accuracy: %.1f%%\n", 100 * *accuracy);
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd eval: held-out frame accuracy of the model on an asgd server pool "
      "(--servers) or of a saved model (--model).");
  return asgd::Run();
}
