#include "server/model_options.h"

#include "model/model_spec_proto.h"

namespace asgd {

void SetModel(const ModelSpec& spec, ParamStoreOptions* options) {
  options->tensors = ModelTensors(spec);
  options->model_spec = ModelSpecToProto(spec).SerializeAsString();
  options->model_id = ModelSpecDigest(spec);
}

}  // namespace asgd
