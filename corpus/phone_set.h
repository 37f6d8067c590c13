// The phone classes a frame label names: the 39 phones of the CMU
// pronouncing dictionary plus "pau" (silence). This file is the one place the
// class list lives; corpus.txt copies it into `classes` so a reader of a corpus
// never needs this header.
//
// Thread-safety: everything here is immutable and safe to use from any thread.
#ifndef ASGD_CORPUS_PHONE_SET_H_
#define ASGD_CORPUS_PHONE_SET_H_

#include <array>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd::corpus {

// Number of frame classes (39 CMU phones + silence).
inline constexpr int kNumPhoneClasses = 40;

// Class id of "pau", the silence class.
inline constexpr int kSilenceClass = 39;

// Class names, indexed by class id.
inline constexpr std::array<absl::string_view, kNumPhoneClasses> kPhoneClasses =
    {"aa", "ae", "ah", "ao", "aw", "ay", "b",  "ch", "d",  "dh",
     "eh", "er", "ey", "f",  "g",  "hh", "ih", "iy", "jh", "k",
     "l",  "m",  "n",  "ng", "ow", "oy", "p",  "r",  "s",  "sh",
     "t",  "th", "uh", "uw", "v",  "w",  "y",  "z",  "zh", "pau"};

// Maps a phone name as flite writes it to its class id. Besides the class
// names themselves it accepts the reduced and allophonic symbols of flite's US
// English phone set, folded into the CMU class they stand for (e.g. the schwa
// "ax" -> "ah", "axr" -> "er", "h#"/"brth" -> "pau"). Returns InvalidArgument
// for any other name.
absl::StatusOr<int> PhoneClassId(absl::string_view phone);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_PHONE_SET_H_
