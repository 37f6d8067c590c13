#include "worker/model_source.h"

#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "worker/ps/connect.h"

namespace asgd {

absl::StatusOr<LoadedModel> LoadModelFrom(const std::string& model_path,
                                          const std::string& servers,
                                          const SecurityOptions& security,
                                          absl::Duration connect_timeout) {
  if (servers.empty() == model_path.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --servers and --model");
  }
  LoadedModel out;
  if (!model_path.empty()) {
    ASGD_ASSIGN_OR_RETURN(out.model, LoadModel(model_path));
    out.source = model_path;
    return out;
  }
  ASGD_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                        ParseServerList(servers));
  PoolClientOptions options;
  options.worker_id = 1u << 31;  // not a training worker
  options.security = security;
  options.connect_timeout = connect_timeout;
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<ParamClient> client,
                        ConnectToPool(addresses, options));
  out.model.spec = client->model();
  out.model.params.resize(client->layout().total_size());
  std::vector<uint64_t> versions;
  ASGD_RETURN_IF_ERROR(
      client->Pull(absl::MakeSpan(out.model.params), &versions));
  out.source = "pool at version";
  for (uint64_t v : versions) out.source += " " + std::to_string(v);
  return out;
}

}  // namespace asgd
