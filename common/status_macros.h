// Small helpers for absl::Status propagation. Debian's Abseil (20220623) ships
// no status macros, so asgd keeps these two.
//
//   ASGD_RETURN_IF_ERROR(DoThing());
//   ASGD_ASSIGN_OR_RETURN(auto value, MakeThing());
#ifndef ASGD_COMMON_STATUS_MACROS_H_
#define ASGD_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ASGD_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    const ::absl::Status asgd_status_ = (expr);     \
    if (!asgd_status_.ok()) return asgd_status_;    \
  } while (false)

#define ASGD_STATUS_CONCAT_INNER_(a, b) a##b
#define ASGD_STATUS_CONCAT_(a, b) ASGD_STATUS_CONCAT_INNER_(a, b)

#define ASGD_ASSIGN_OR_RETURN(lhs, expr)                                    \
  ASGD_ASSIGN_OR_RETURN_IMPL_(ASGD_STATUS_CONCAT_(asgd_statusor_, __LINE__), \
                              lhs, expr)

#define ASGD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(statusor).value()

#endif  // ASGD_COMMON_STATUS_MACROS_H_
