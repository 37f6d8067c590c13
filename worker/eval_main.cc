// asgd_eval: held-out frame accuracy of the model on a server pool or of a
// saved model, on a corpus's held-out split. Any model kind (the model says
// how its examples are made).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/security_flags.h"
#include "corpus/corpus_io.h"
#include "model/cpu_backend.h"
#include "model/model_file.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"
#include "worker/loop/loop.h"
#include "worker/ps/connect.h"

ABSL_FLAG(std::string, corpus, "", "Corpus directory (its held-out split is used).");
ABSL_FLAG(std::string, servers, "",
          "Evaluate the model currently on this pool (host:port,...).");
ABSL_FLAG(std::string, model, "", "Evaluate this saved model instead.");
ABSL_FLAG(int, batch_size, 1024, "Frames per evaluation batch.");
ABSL_FLAG(int, chunk_frames, 20,
          "Recurrent models: labelled frames per chunk (as in training).");
ABSL_FLAG(int, chunk_left_context, -1,
          "Recurrent models: extra frames before each chunk (-1: the "
          "model's default).");
ABSL_FLAG(int, chunk_right_context, -1,
          "Recurrent models: extra frames after each chunk (-1: the model's "
          "default).");
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
  if (absl::GetFlag(FLAGS_corpus).empty()) {
    return Fail(absl::InvalidArgumentError("--corpus is required"));
  }
  auto corpus = corpus::LoadCorpus(absl::GetFlag(FLAGS_corpus));
  if (!corpus.ok()) return Fail(corpus.status());

  ModelSpec spec;
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
    PoolClientOptions options;
    options.worker_id = 1u << 31;  // not a training worker
    auto security = SecurityOptionsFromFlags();
    if (!security.ok()) return Fail(security.status());
    options.security = *security;
    options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
    auto client = ConnectToPool(*addresses, options);
    if (!client.ok()) return Fail(client.status());
    spec = (*client)->model();
    params.resize((*client)->layout().total_size());
    std::vector<uint64_t> versions;
    if (absl::Status s = (*client)->Pull(absl::MakeSpan(params), &versions);
        !s.ok()) {
      return Fail(s);
    }
    source = "pool at version";
    for (uint64_t v : versions) source += " " + std::to_string(v);
  }
  if (absl::Status s = CheckDataFitsModel(corpus->info.feature_dim,
                                          corpus->info.num_classes, spec);
      !s.ok()) {
    return Fail(s);
  }
  const Utterances utterances =
      Utterances::FromCorpus(corpus->info, corpus->heldout);
  DataOptions data;
  data.chunk_frames = absl::GetFlag(FLAGS_chunk_frames);
  data.left_context = absl::GetFlag(FLAGS_chunk_left_context);
  data.right_context = absl::GetFlag(FLAGS_chunk_right_context);
  auto heldout = MakeExamples(spec, &utterances, data);
  if (!heldout.ok()) return Fail(heldout.status());
  const BatchShape shape =
      ShapeOfBatch(**heldout, std::max(1, absl::GetFlag(FLAGS_batch_size)));
  auto backend = CreateCpuBackend(spec, shape.rows());
  if (!backend.ok()) return Fail(backend.status());
  auto accuracy =
      EvaluateAccuracy(backend->get(), params, **heldout, shape.examples);
  if (!accuracy.ok()) return Fail(accuracy.status());
  std::printf("evaluated %s (%s) on %lld held-out frames "
              "(always-majority-class baseline %.1f%%)\n",
              source.c_str(), DescribeModel(spec).c_str(),
              static_cast<long long>(utterances.num_frames()),
              100 * utterances.MajorityClassRate());
  std::printf("held-out frame accuracy: %.1f%%\n", 100 * *accuracy);
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd eval: held-out frame accuracy of the model on an asgd server pool "
      "(--servers) or of a saved model (--model), on a corpus's held-out "
      "split.\nExample: asgd_eval --corpus=/tmp/asgd-demo/corpus "
      "--servers=127.0.0.1:5001,127.0.0.1:5002");
  return asgd::Run();
}
