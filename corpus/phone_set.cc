#include "corpus/phone_set.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace asgd::corpus {
namespace {

static_assert(kPhoneClasses[kSilenceClass] == "pau");

// flite's US English phone set (lang/usenglish/us_phoneset) has symbols the
// CMU dictionary does not use; each is folded into the nearest CMU phone.
constexpr std::pair<absl::string_view, absl::string_view> kAliases[] = {
    {"ax", "ah"}, {"axr", "er"}, {"dx", "t"},     {"el", "l"},
    {"em", "m"},  {"en", "n"},   {"nx", "n"},     {"hv", "hh"},
    {"wh", "w"},  {"h#", "pau"}, {"brth", "pau"}, {"sil", "pau"},
};

int FindClass(absl::string_view name) {
  for (int i = 0; i < kNumPhoneClasses; ++i) {
    if (kPhoneClasses[i] == name) return i;
  }
  return -1;
}

}  // namespace

absl::StatusOr<int> PhoneClassId(absl::string_view phone) {
  int id = FindClass(phone);
  if (id >= 0) return id;
  for (const auto& [alias, target] : kAliases) {
    if (alias == phone) return FindClass(target);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown phone \"", phone, "\""));
}

}  // namespace asgd::corpus
