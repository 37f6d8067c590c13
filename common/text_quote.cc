#include "common/text_quote.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace asgd {

std::string EscapeForMessage(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::CHexEscape(text);
  return absl::StrCat(absl::CHexEscape(text.substr(0, max_bytes)), "...(",
                      text.size(), " bytes)");
}

}  // namespace asgd
