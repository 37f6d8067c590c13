// What an in-process worker of the end-to-end tests trains on: its part of a
// corpus as the model's examples (frames or chunks), and a CPU backend sized
// for its minibatches.
//
//   ASGD_ASSIGN_OR_RETURN(WorkerData d, MakeWorkerData(corpus, spec, w, n, 128));
//   Trainer trainer(client, d.backend.get(), d.train.get(), d.heldout.get(), ...);
#ifndef ASGD_TESTS_TEST_WORKER_H_
#define ASGD_TESTS_TEST_WORKER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "corpus/corpus_io.h"
#include "model/cpu_backend.h"
#include "worker/data/make_examples.h"
#include "worker/data/utterances.h"

namespace asgd {

struct WorkerData {
  std::unique_ptr<Utterances> train_utts, heldout_utts;
  std::unique_ptr<ExampleSet> train, heldout;
  BatchShape shape;
  std::unique_ptr<ModelBackend> backend;
};

// Part `part` of `parts` of the corpus's training utterances (all of the
// held-out ones), for minibatches of about `batch_frames` frames.
inline absl::StatusOr<WorkerData> MakeWorkerData(
    const corpus::Corpus& corpus, const ModelSpec& spec, int part, int parts,
    int batch_frames, const DataOptions& data = {}) {
  WorkerData d;
  d.train_utts = std::make_unique<Utterances>(
      Utterances::FromCorpus(corpus.info, corpus.train, part, parts));
  d.heldout_utts = std::make_unique<Utterances>(
      Utterances::FromCorpus(corpus.info, corpus.heldout));
  auto train = MakeExamples(spec, d.train_utts.get(), data);
  if (!train.ok()) return train.status();
  auto heldout = MakeExamples(spec, d.heldout_utts.get(), data);
  if (!heldout.ok()) return heldout.status();
  d.train = *std::move(train);
  d.heldout = *std::move(heldout);
  d.shape = ShapeOfBatch(*d.train, batch_frames);
  auto backend = CreateCpuBackend(spec, d.shape.rows());
  if (!backend.ok()) return backend.status();
  d.backend = *std::move(backend);
  return d;
}

}  // namespace asgd

#endif  // ASGD_TESTS_TEST_WORKER_H_
