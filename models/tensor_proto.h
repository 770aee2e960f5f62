// Conversions between troupe.proto.Tensor (raw little-endian bytes, used to ship weights between
// processes) and at::Tensor.
//
// Both directions copy the bytes once: a proto owns its `data` string and a tensor owns its
// storage, so neither can alias the other safely. Tensors on another device are copied to the CPU
// first; non-contiguous tensors are made contiguous (row-major) first.
//
// Example:
//   absl::StatusOr<proto::TensorMap> wire = TensorMapToProto(NamedParameters(model), version);
//   ... send wire ...
//   absl::StatusOr<NamedTensors> back = TensorMapFromProto(*wire);
//
// Thread-safety: all functions are thread-safe (they only read their arguments).
#ifndef TROUPE_MODELS_TENSOR_PROTO_H_
#define TROUPE_MODELS_TENSOR_PROTO_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/core.pb.h"

namespace troupe {
namespace models {

// Named tensors in a fixed order (a state dict). Same alias as in models/safetensors.h.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// proto::DType for a LibTorch scalar type; InvalidArgument for types the proto cannot carry
// (complex, quantized, ...).
absl::StatusOr<proto::DType> ToProtoDType(at::ScalarType type);
// LibTorch scalar type for a proto::DType; InvalidArgument for DTYPE_UNSPECIFIED / unknown values.
absl::StatusOr<at::ScalarType> FromProtoDType(proto::DType dtype);

// A CPU tensor holding a copy of `tensor`'s data. InvalidArgument (naming the tensor) if the dtype
// is unsupported or the byte count disagrees with dtype * shape.
absl::StatusOr<at::Tensor> TensorFromProto(const proto::Tensor& tensor);

// The bytes of `tensor` (copied to the CPU, row-major) with its dtype, shape and `name`.
// InvalidArgument for an undefined tensor or an unsupported dtype.
absl::StatusOr<proto::Tensor> TensorToProto(const at::Tensor& tensor, absl::string_view name = "");

// Every tensor, in order, named, with `version`. InvalidArgument as TensorToProto.
absl::StatusOr<proto::TensorMap> TensorMapToProto(const NamedTensors& tensors, int64_t version);

// The tensors of `map` in order. InvalidArgument on a bad tensor or a repeated name.
absl::StatusOr<NamedTensors> TensorMapFromProto(const proto::TensorMap& map);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_TENSOR_PROTO_H_
