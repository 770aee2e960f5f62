// Early-return helpers for absl::Status / absl::StatusOr (Debian's Abseil 20220623 has none).
//
//   TROUPE_RETURN_IF_ERROR(WriteHeader(file));
//   TROUPE_ASSIGN_OR_RETURN(Config config, LoadConfig(path));
//
// Both evaluate their argument exactly once and return its status unchanged on error.
#ifndef TROUPE_BASE_STATUS_MACROS_H_
#define TROUPE_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TROUPE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status troupe_status_ = (expr);          \
    if (!troupe_status_.ok()) return troupe_status_; \
  } while (0)

#define TROUPE_STATUS_CONCAT_INNER_(a, b) a##b
#define TROUPE_STATUS_CONCAT_(a, b) TROUPE_STATUS_CONCAT_INNER_(a, b)

#define TROUPE_ASSIGN_OR_RETURN(lhs, expr) \
  TROUPE_ASSIGN_OR_RETURN_IMPL_(TROUPE_STATUS_CONCAT_(troupe_statusor_, __LINE__), lhs, expr)

#define TROUPE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // TROUPE_BASE_STATUS_MACROS_H_
