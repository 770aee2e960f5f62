#include "models/tensor_proto.h"

#include <ATen/ATen.h>

#include <cstring>
#include <exception>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/tensor_codec.h"
#include "models/catch_torch.h"

namespace troupe {
namespace models {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "proto::Tensor data is little-endian; a big-endian host needs byte swapping");

std::string DisplayName(absl::string_view name) {
  return name.empty() ? std::string("tensor") : absl::StrCat("tensor '", name, "'");
}

}  // namespace

absl::StatusOr<proto::DType> ToProtoDType(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return proto::FLOAT32;
    case at::kHalf:
      return proto::FLOAT16;
    case at::kBFloat16:
      return proto::BFLOAT16;
    case at::kDouble:
      return proto::FLOAT64;
    case at::kLong:
      return proto::INT64;
    case at::kInt:
      return proto::INT32;
    case at::kChar:
      return proto::INT8;
    case at::kByte:
      return proto::UINT8;
    case at::kBool:
      return proto::BOOL;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", c10::toString(type), " has no proto::DType"));
  }
}

absl::StatusOr<at::ScalarType> FromProtoDType(proto::DType dtype) {
  switch (dtype) {
    case proto::FLOAT32:
      return at::kFloat;
    case proto::FLOAT16:
      return at::kHalf;
    case proto::BFLOAT16:
      return at::kBFloat16;
    case proto::FLOAT64:
      return at::kDouble;
    case proto::INT64:
      return at::kLong;
    case proto::INT32:
      return at::kInt;
    case proto::INT8:
      return at::kChar;
    case proto::UINT8:
      return at::kByte;
    case proto::BOOL:
      return at::kBool;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unsupported proto dtype ",
                                                     proto::DType_Name(dtype), " (",
                                                     static_cast<int>(dtype), ")"));
  }
}

absl::StatusOr<at::Tensor> TensorFromProto(const proto::Tensor& tensor) {
  const std::string who = DisplayName(tensor.name());
  absl::StatusOr<at::ScalarType> type = FromProtoDType(tensor.dtype());
  if (!type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", type.status().message()));
  }
  absl::Status valid = ValidateTensor(tensor);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(who, ": ", valid.message()));
  std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
  return CatchTorchAs(absl::StatusCode::kInvalidArgument, absl::StatusCode::kInvalidArgument, who,
                      [&]() -> absl::StatusOr<at::Tensor> {
                        at::Tensor out = at::empty(shape, at::TensorOptions().dtype(*type));
                        if (!tensor.data().empty()) {
                          std::memcpy(out.data_ptr(), tensor.data().data(), tensor.data().size());
                        }
                        return out;
                      });
}

absl::StatusOr<proto::Tensor> TensorToProto(const at::Tensor& tensor, absl::string_view name) {
  const std::string who = DisplayName(name);
  if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrCat(who, " is undefined"));
  absl::StatusOr<proto::DType> dtype = ToProtoDType(tensor.scalar_type());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", dtype.status().message()));
  }
  proto::Tensor out;
  out.set_name(std::string(name));
  out.set_dtype(*dtype);
  for (int64_t d : tensor.sizes()) out.add_shape(d);
  TROUPE_RETURN_IF_ERROR(CatchTorchAs(
      absl::StatusCode::kInvalidArgument, absl::StatusCode::kInvalidArgument, who, [&] {
        at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
        out.mutable_data()->assign(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
        return absl::OkStatus();
      }));
  return out;
}

absl::StatusOr<proto::TensorMap> TensorMapToProto(const NamedTensors& tensors, int64_t version) {
  proto::TensorMap map;
  map.set_version(version);
  for (const auto& [name, tensor] : tensors) {
    TROUPE_ASSIGN_OR_RETURN(*map.add_tensors(), TensorToProto(tensor, name));
  }
  return map;
}

absl::StatusOr<NamedTensors> TensorMapFromProto(const proto::TensorMap& map) {
  NamedTensors out;
  out.reserve(map.tensors_size());
  absl::flat_hash_set<std::string> seen;
  for (const proto::Tensor& t : map.tensors()) {
    if (!seen.insert(t.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor map has two tensors named '", t.name(), "'"));
    }
    TROUPE_ASSIGN_OR_RETURN(at::Tensor tensor, TensorFromProto(t));
    out.emplace_back(t.name(), std::move(tensor));
  }
  return out;
}

}  // namespace models
}  // namespace troupe
