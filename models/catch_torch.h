// CatchTorch: LibTorch reports errors by throwing; at a component boundary they become statuses.
//
//   TROUPE_ASSIGN_OR_RETURN(at::Tensor t, CatchTorch("loading w", [&]() ->
//   absl::StatusOr<at::Tensor> {
//     return at::ones({2});
//   }));
//
// `fn` returns absl::Status or absl::StatusOr<T>; a c10::Error or std::exception it throws is
// returned as INTERNAL "WHAT: message" (LibTorch's message without its backtrace).
#ifndef TROUPE_MODELS_CATCH_TORCH_H_
#define TROUPE_MODELS_CATCH_TORCH_H_

#include <c10/util/Exception.h>

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace troupe::models {

template <typename Fn>
auto CatchTorch(absl::string_view what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace troupe::models

#endif  // TROUPE_MODELS_CATCH_TORCH_H_
