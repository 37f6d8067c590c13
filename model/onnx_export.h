// ONNX export of any asgd model (model/model_spec.h), so that a model
// trained here runs in other runtimes (onnxruntime and the like).
//
// The graph takes one utterance's input rows and gives their
// log-posteriors:
//   input           "input"          float [frames, input_dim]: row t is
//                                    the 2*context+1 frames around frame t,
//                                    stacked (edge frames repeated), of
//                                    features normalised as in training
//   output          "log_posteriors" float [frames, num_classes] (natural
//                                    log of the softmax); a multi-frame
//                                    model's [frames, k * num_classes],
//                                    head after head (model_spec.h)
// `frames` is a symbolic dimension. A recurrent model reads the rows as one
// sequence (step t = row t), from a zero state, as asgd_forward does.
//
// Layers map directly where ONNX has the operator: dense → Gemm and
// Relu/Sigmoid/Tanh; conv → Reshape to [frames, 1, 2*context+1,
// feature_dim], Conv, the activation, MaxPool (floor: leftover positions
// dropped), and Flatten after the last one (channel-major, as asgd's rows);
// the output layer → Gemm and LogSoftmax (per head of a multi-frame model:
// Reshape to [frames, k, num_classes], LogSoftmax, Reshape back). ONNX's LSTM operator has neither a
// recurrent projection nor cell clipping (its `clip` bounds the gate
// pre-activations), so an LSTM layer is written out: its input part for
// all steps as one Gemm, then a Scan whose body is one step of
// model/layers/lstm.h (Gemm for the recurrent part, Split into the gates i,
// f, g, o, Sigmoid/Tanh, c = f*c' + i*g, Clip to ±cell_clip when set,
// h = o*tanh(c), Gemm with w_p when projected); the backward direction of a
// BLSTM is a Scan over the reversed sequence whose outputs are reversed
// back, concatenated after the forward one's. Initializers keep asgd's
// tensor names (layer0/weight, layer1/fw/w_x, ...). Opset 17, IR version 8;
// the model's metadata holds its spec (key "asgd_model_spec").
//
//   ASGD_ASSIGN_OR_RETURN(std::string bytes, ExportOnnx(spec, params));
//   ASGD_RETURN_IF_ERROR(CheckOnnx(bytes));  // the ONNX checker
//
// Thread-safety: reentrant.
#ifndef ASGD_MODEL_ONNX_EXPORT_H_
#define ASGD_MODEL_ONNX_EXPORT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/model_spec.h"

namespace asgd {

inline constexpr char kOnnxInputName[] = "input";
inline constexpr char kOnnxOutputName[] = "log_posteriors";

// The serialized onnx.ModelProto. InvalidArgument for an invalid spec or a
// parameter count other than the spec's.
absl::StatusOr<std::string> ExportOnnx(const ModelSpec& spec,
                                       absl::Span<const float> params);

// Runs the ONNX checker (with shape inference) over a serialized model:
// InvalidArgument with the checker's message when it refuses it.
absl::Status CheckOnnx(const std::string& serialized);

// ExportOnnx, CheckOnnx, then the bytes written to `path` atomically.
absl::Status WriteOnnxModel(const std::string& path, const ModelSpec& spec,
                            absl::Span<const float> params);

}  // namespace asgd

#endif  // ASGD_MODEL_ONNX_EXPORT_H_
