#include "worker/ps/pool_description.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/protocol.h"
#include "common/status_macros.h"
#include "compression/grad_codec.h"
#include "model/model_spec_proto.h"
#include "model/prune_mask.h"

namespace asgd {

// Checks the description `d` of the server at `address` (the pool's first
// description: `first`) against the pool and what the client asks for.
absl::Status CheckDescription(const std::string& address,
                              const asgd::v1::ModelDescription& d,
                              const std::string& first_address,
                              const asgd::v1::ModelDescription& first,
                              size_t num_addresses,
                              const PoolClientOptions& options,
                              PushEncoding push_encoding) {
  if (d.num_servers() != num_addresses) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", address, " belongs to a pool of ", d.num_servers(),
        " servers but ", num_addresses, " addresses were given"));
  }
  // Protocol 2 (this build), or a server of protocol 1 (which does not say)
  // that serves the streams: both speak PushStream/PullStream.
  if (d.protocol_version() != 0 && d.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", address, " speaks protocol version ", d.protocol_version(),
        "; this asgd_worker speaks ", kProtocolVersion,
        " (run the same asgd release on servers and workers)"));
  }
  if (!d.streams()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", address,
        " too old: asgd needs PushStream/PullStream (upgrade asgd_server)"));
  }
  if (d.model().SerializeAsString() != first.model().SerializeAsString()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "servers ", first_address, " and ", address,
        " hold different models: start every server with the same model "
        "flags"));
  }
  if (d.layout_fingerprint() != first.layout_fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "servers ", first_address, " and ", address,
        " hold different models (layout fingerprints ",
        first.layout_fingerprint(), " vs ", d.layout_fingerprint(),
        "): start every server with the same model flags"));
  }
  auto lists = [](const auto& dtypes, int value) {
    return std::find(dtypes.begin(), dtypes.end(), value) != dtypes.end();
  };
  if (options.wire_dtype != WireDtype::kFloat32 &&
      !lists(d.wire_dtypes(), static_cast<int>(options.wire_dtype))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", address, " does not support the ",
        WireDtypeName(options.wire_dtype),
        " wire format (an older asgd_server?); use --wire_dtype=fp32"));
  }
  if (IsCompressed(push_encoding) &&
      (!lists(d.push_dtypes(), static_cast<int>(push_encoding)) ||
       d.compressed_format_version() !=
           static_cast<uint32_t>(kGradCodecVersion) ||
       d.max_compressed_chunk_elements() < 1)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", address, " does not accept ",
        PushEncodingName(push_encoding), " pushes in compressed format version ",
        kGradCodecVersion, " (it offers format version ",
        d.compressed_format_version(),
        "; an older asgd_server, or one started with "
        "--compressed_pushes=false?); use --push_encoding=fp32 or bf16"));
  }
  return absl::OkStatus();
}

// The model the pool describes in `d`, and its layout, whose tensors and
// fingerprint (which covers the spec) must be the pool's.
absl::StatusOr<std::pair<ModelSpec, ModelLayout>> PoolModel(
    const asgd::v1::ModelDescription& d) {
  absl::StatusOr<ModelSpec> model = ModelSpecFromProto(d.model());
  if (!model.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pool serves a model this worker cannot use (an older or newer "
        "asgd_server?): ", model.status().message()));
  }
  // A pruned model's identity includes its mask (model/prune_mask.h).
  const auto mask = d.model_attributes().find(kPruneMaskAttribute);
  ASGD_ASSIGN_OR_RETURN(
      ModelLayout layout,
      ModelLayout::Create(
          ModelTensors(*model), d.num_servers(), d.num_shards(),
          ModelIdWithMask(ModelSpecDigest(*model),
                          mask != d.model_attributes().end() ? mask->second
                                                             : "")));
  bool same = static_cast<size_t>(d.tensors_size()) == layout.tensors().size();
  for (size_t t = 0; same && t < layout.tensors().size(); ++t) {
    const auto& described = d.tensors(static_cast<int>(t));
    std::vector<int64_t> shape(described.shape().begin(),
                               described.shape().end());
    same = described.name() == layout.tensors()[t].name &&
           shape == layout.tensors()[t].shape;
  }
  if (!same || layout.Fingerprint() != d.layout_fingerprint()) {
    return absl::FailedPreconditionError(
        "the pool's tensors or layout fingerprint do not match the model it "
        "describes (incompatible asgd versions?)");
  }
  return std::make_pair(*std::move(model), std::move(layout));
}

}  // namespace asgd
