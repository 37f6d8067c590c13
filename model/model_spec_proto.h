// ModelSpec <-> asgd.v1.ModelSpec (proto/model.proto), and the model config
// file: a ModelSpec message in protobuf text format.
//
//   auto spec = ParseModelConfig(text);   // validated ModelSpec
//   asgd::v1::ModelSpec msg = ModelSpecToProto(*spec);
//
// Thread-safety: pure functions.
#ifndef ASGD_MODEL_MODEL_SPEC_PROTO_H_
#define ASGD_MODEL_MODEL_SPEC_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_spec.h"
#include "proto/model.pb.h"

namespace asgd {

asgd::v1::ModelSpec ModelSpecToProto(const ModelSpec& spec);

// InvalidArgument (naming the layer and field) for sizes out of range, an
// unknown activation, a layer with no kind, or a spec ValidateModelSpec
// refuses.
absl::StatusOr<ModelSpec> ModelSpecFromProto(const asgd::v1::ModelSpec& msg);

// Parses a text-format asgd.v1.ModelSpec (a model config file's contents),
// then ModelSpecFromProto. InvalidArgument with the parser's line and column
// for malformed text, or for a text of more than 1 MiB.
absl::StatusOr<ModelSpec> ParseModelConfig(absl::string_view text);

// Reads and parses a model config file; NotFound when it cannot be read.
absl::StatusOr<ModelSpec> ReadModelConfig(const std::string& path);

// One-line text format of the spec (for logs, the model file, checkpoints):
// ParseModelConfig(ModelSpecToText(s)) gives s back.
std::string ModelSpecToText(const ModelSpec& spec);

// A stable hex digest of the spec (FNV-1a over its canonical text form),
// for fingerprints.
std::string ModelSpecDigest(const ModelSpec& spec);

}  // namespace asgd

#endif  // ASGD_MODEL_MODEL_SPEC_PROTO_H_
