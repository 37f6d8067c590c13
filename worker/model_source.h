// The model a tool works on (asgd_eval, asgd_forward, asgd_export_onnx): a
// file saved with --save_model, or the model on a server pool now.
//
//   ASGD_ASSIGN_OR_RETURN(LoadedModel m,
//                         LoadModelFrom(path, servers, security, timeout));
//   // m.model.spec, m.model.params; m.source for the log
//
// Thread-safety: reentrant.
#ifndef ASGD_WORKER_MODEL_SOURCE_H_
#define ASGD_WORKER_MODEL_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "model/model_file.h"

namespace asgd {

struct LoadedModel {
  SavedModel model;
  std::string source;  // "FILE" or "pool at version V V ..."
};

// Exactly one of `model_path` and `servers` (host:port,...) must be set
// (InvalidArgument otherwise). The errors of LoadModel, or of connecting to
// the pool and pulling from it.
absl::StatusOr<LoadedModel> LoadModelFrom(const std::string& model_path,
                                          const std::string& servers,
                                          const SecurityOptions& security,
                                          absl::Duration connect_timeout);

}  // namespace asgd

#endif  // ASGD_WORKER_MODEL_SOURCE_H_
