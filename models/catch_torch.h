// CatchTorch: LibTorch reports errors by throwing; at a component boundary they become statuses.
//
//   TROUPE_ASSIGN_OR_RETURN(at::Tensor t, CatchTorch("loading w", [&]() ->
//   absl::StatusOr<at::Tensor> {
//     return at::ones({2});
//   }));
//
// `fn` returns absl::Status or absl::StatusOr<T>; a c10::Error or std::exception it throws is
// returned as INTERNAL "WHAT: message" (LibTorch's message without its backtrace; the message
// alone when `what` is empty). CatchTorchAs chooses the codes, for boundaries where a LibTorch
// error means bad input (INVALID_ARGUMENT) or a failed allocation (RESOURCE_EXHAUSTED).
#ifndef TROUPE_MODELS_CATCH_TORCH_H_
#define TROUPE_MODELS_CATCH_TORCH_H_

#include <c10/util/Exception.h>

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace troupe::models {

// A c10::Error becomes `torch_code`, any other std::exception `other_code`.
template <typename Fn>
auto CatchTorchAs(absl::StatusCode torch_code, absl::StatusCode other_code, absl::string_view what,
                  Fn&& fn) -> decltype(fn()) {
  auto message = [what](const char* m) {
    return what.empty() ? std::string(m) : absl::StrCat(what, ": ", m);
  };
  try {
    return fn();
  } catch (const c10::Error& e) {
    return absl::Status(torch_code, message(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::Status(other_code, message(e.what()));
  }
}

template <typename Fn>
auto CatchTorch(absl::string_view what, Fn&& fn) -> decltype(fn()) {
  return CatchTorchAs(absl::StatusCode::kInternal, absl::StatusCode::kInternal, what,
                      std::forward<Fn>(fn));
}

}  // namespace troupe::models

#endif  // TROUPE_MODELS_CATCH_TORCH_H_
