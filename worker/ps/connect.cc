#include "worker/ps/connect.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "worker/ps/grpc_param_client.h"

namespace asgd {

absl::StatusOr<std::unique_ptr<ParamClient>> ConnectToPool(
    const std::vector<std::string>& addresses,
    const PoolClientOptions& options) {
  auto client = GrpcParamClient::Create(addresses, options);
  if (!client.ok()) return client.status();
  return std::unique_ptr<ParamClient>(std::move(*client));
}

absl::StatusOr<std::vector<std::string>> ParseServerList(
    const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    const size_t colon = part.rfind(':');
    if (colon == absl::string_view::npos || colon == 0 ||
        colon + 1 == part.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad server address '", part, "' (want host:port)"));
    }
    out.emplace_back(part);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        "no servers given (want --servers=host:port,host:port,...)");
  }
  return out;
}

}  // namespace asgd
