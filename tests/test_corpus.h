// The small generated corpus the end-to-end tests train on: 160 training and
// 24 held-out utterances from two flite voices, in TEST_TMPDIR/<name>.
//
// Generating forks child processes (flite is not thread-safe): call it from
// SetUpTestSuite(), before any gRPC thread exists.
#ifndef ASGD_TESTS_TEST_CORPUS_H_
#define ASGD_TESTS_TEST_CORPUS_H_

#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "corpus/generator.h"

namespace asgd {

inline absl::StatusOr<std::string> GenerateTestCorpus(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  corpus::GeneratorOptions options;
  options.out_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  options.num_train = 160;
  options.num_heldout = 24;
  options.voices = {"kal16", "slt"};
  options.jobs = 2;
  options.seed = 5;
  absl::Status s = corpus::GenerateCorpus(options);
  if (!s.ok()) return s;
  return options.out_dir;
}

}  // namespace asgd

#endif  // ASGD_TESTS_TEST_CORPUS_H_
