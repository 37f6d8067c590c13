#include "common/pool_run_id.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace asgd {

absl::Status ValidatePoolRunId(absl::string_view run_id) {
  if (run_id.size() < kMinPoolRunIdBytes || run_id.size() > kMaxPoolRunIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the minibatch pool needs a run id of ", kMinPoolRunIdBytes, " to ",
        kMaxPoolRunIdBytes, " bytes shared by the run's workers, got ",
        run_id.size(), " bytes (asgd_worker --pool_run_id_file)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPoolRunIdFile(const std::string& path,
                                              absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", flag, " file \"", path, "\""));
  }
  // Read at most a little more than the longest run id, whatever the file.
  std::string contents(kMaxPoolRunIdBytes + 64, '\0');
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  contents.resize(static_cast<size_t>(in.gcount()));
  if (in && in.peek() != std::ifstream::traits_type::eof()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " file \"", path, "\" is too long for a run id (at most ",
        kMaxPoolRunIdBytes, " bytes)"));
  }
  const absl::string_view run_id = absl::StripAsciiWhitespace(contents);
  if (absl::Status s = ValidatePoolRunId(run_id); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " file \"", path, "\": ", s.message()));
  }
  return std::string(run_id);
}

}  // namespace asgd
