// asgd_worker: pulls the model from the parameter-server pool, computes
// minibatch gradients of the DNN acoustic model on its part of the corpus and
// pushes them, asynchronously, until it has done its epochs or steps.
//
//   asgd_worker --servers=127.0.0.1:5001,127.0.0.1:5002 --corpus=/tmp/corpus \
//       --worker_index=0 --num_workers=2 --epochs=3
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "corpus/corpus_io.h"
#include "worker/dnn.h"
#include "worker/frames.h"
#include "worker/grpc_param_client.h"
#include "worker/model_file.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, servers, "",
          "Comma-separated host:port of every server in the pool (any order).");
ABSL_FLAG(std::string, corpus, "", "Corpus directory (see corpus/README.md).");
ABSL_FLAG(int, worker_index, 0, "This worker's index in [0, num_workers).");
ABSL_FLAG(int, num_workers, 1,
          "Number of workers; worker i trains on utterances u with "
          "u % num_workers == i.");
ABSL_FLAG(int, batch_size, 256, "Frames per minibatch.");
ABSL_FLAG(double, epochs, 1.0,
          "Passes over this worker's part of the data (0: no limit).");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0: no limit).");
ABSL_FLAG(int, context, 5, "Frames of context on each side (5: 11 frames).");
ABSL_FLAG(int, log_every, 100, "Steps between progress lines.");
ABSL_FLAG(int, eval_every, 0,
          "Steps between held-out evaluations (0: only at the end).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the minibatch order.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads for this worker.");
ABSL_FLAG(std::string, backend, "cpu", "Math backend: cpu.");
ABSL_FLAG(std::string, save_model, "",
          "If set, save the final pulled model to this file.");
ABSL_FLAG(int, connect_timeout_s, 60,
          "Seconds to wait for the servers to come up.");
ABSL_FLAG(int, rpc_timeout_s, 60, "Deadline of every pull and push, seconds.");

namespace asgd {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "asgd_worker: %s\n", s.ToString().c_str());
  return 1;
}

int Run() {
  const int index = absl::GetFlag(FLAGS_worker_index);
  const int num_workers = absl::GetFlag(FLAGS_num_workers);
  if (num_workers < 1 || index < 0 || index >= num_workers) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--worker_index=%d must be in [0, --num_workers=%d)", index, num_workers)));
  }
  if (absl::GetFlag(FLAGS_corpus).empty()) {
    return Fail(absl::InvalidArgumentError("--corpus is required"));
  }
  if (absl::GetFlag(FLAGS_backend) != "cpu") {
    return Fail(absl::InvalidArgumentError(
        "--backend must be cpu (this build has no other backend)"));
  }
  if (absl::GetFlag(FLAGS_batch_size) < 1) {
    return Fail(absl::InvalidArgumentError("--batch_size must be >= 1"));
  }
  auto addresses = ParseServerList(absl::GetFlag(FLAGS_servers));
  if (!addresses.ok()) return Fail(addresses.status());
  SetBlasThreads(absl::GetFlag(FLAGS_blas_threads));

  auto corpus = corpus::LoadCorpus(absl::GetFlag(FLAGS_corpus));
  if (!corpus.ok()) return Fail(corpus.status());
  const int context = absl::GetFlag(FLAGS_context);
  FrameData train(corpus->info, corpus->train, context, index, num_workers);
  FrameData heldout(corpus->info, corpus->heldout, context);
  std::printf("worker %d: %lld training frames (part %d of %d), %lld held-out\n",
              index, static_cast<long long>(train.num_frames()), index,
              num_workers, static_cast<long long>(heldout.num_frames()));

  GrpcClientOptions client_options;
  client_options.worker_id = index;
  client_options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  client_options.rpc_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  auto client = GrpcParamClient::Create(*addresses, client_options);
  if (!client.ok()) return Fail(client.status());
  auto spec = DnnSpecFromPool(**client);
  if (!spec.ok()) return Fail(spec.status());
  auto backend = CreateCpuDnn(*spec, absl::GetFlag(FLAGS_batch_size));
  if (!backend.ok()) return Fail(backend.status());
  std::printf("worker %d: connected to %zu servers, model %lld params, backend %s\n",
              index, addresses->size(),
              static_cast<long long>((*client)->layout().total_size()),
              std::string((*backend)->name()).c_str());
  std::fflush(stdout);

  TrainerOptions options;
  options.worker_index = index;
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.log_every = absl::GetFlag(FLAGS_log_every);
  options.eval_every = absl::GetFlag(FLAGS_eval_every);
  options.seed = absl::GetFlag(FLAGS_seed);
  Trainer trainer(client->get(), backend->get(), &train, &heldout, options,
                  &std::cout);
  auto result = trainer.Run();
  if (!result.ok()) return Fail(result.status());
  std::printf(
      "worker %d done: %lld steps, %lld frames in %.1f s (%.0f frames/s), "
      "%lld pushes dropped as stale\n",
      index, static_cast<long long>(result->steps),
      static_cast<long long>(result->frames), result->seconds,
      result->frames / std::max(result->seconds, 1e-9),
      static_cast<long long>(result->pushes_dropped));
  if (result->heldout_accuracy >= 0) {
    std::printf("worker %d held-out frame accuracy: %.1f%%\n", index,
                100 * result->heldout_accuracy);
  }
  if (const std::string path = absl::GetFlag(FLAGS_save_model); !path.empty()) {
    if (absl::Status s = SaveModel(path, *spec, result->params); !s.ok()) {
      return Fail(s);
    }
    std::printf("worker %d: saved model to %s\n", index, path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace asgd

int main(int argc, char** argv) {
  asgd::ParseCommandLine(
      argc, argv,
      "asgd worker: trains the DNN acoustic model held by an asgd server pool "
      "with asynchronous SGD.\nExample: asgd_worker "
      "--servers=127.0.0.1:5001,127.0.0.1:5002 --corpus=/tmp/asgd-corpus "
      "--worker_index=0 --num_workers=2");
  return asgd::Run();
}
