#include "runtime/collective/collective_types.h"

namespace troupe::collective {

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

}  // namespace troupe::collective
