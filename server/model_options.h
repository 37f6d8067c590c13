// SetModel: fills the model part of a parameter store's options from a
// model spec: its tensors, the spec DescribeModel publishes, and its
// identity in the layout fingerprint (and so in every checkpoint).
//
// Thread-safety: pure function.
#ifndef ASGD_SERVER_MODEL_OPTIONS_H_
#define ASGD_SERVER_MODEL_OPTIONS_H_

#include "model/model_spec.h"
#include "server/param_store.h"

namespace asgd {

// The spec must be valid (ValidateModelSpec).
void SetModel(const ModelSpec& spec, ParamStoreOptions* options);

}  // namespace asgd

#endif  // ASGD_SERVER_MODEL_OPTIONS_H_
