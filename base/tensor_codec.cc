#include "base/tensor_codec.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace troupe {

int64_t DTypeSize(proto::DType dtype) {
  switch (dtype) {
    case proto::FLOAT32:
    case proto::INT32:
      return 4;
    case proto::FLOAT16:
    case proto::BFLOAT16:
      return 2;
    case proto::FLOAT64:
    case proto::INT64:
      return 8;
    case proto::INT8:
    case proto::UINT8:
    case proto::BOOL:
      return 1;
    default:
      return 0;
  }
}

absl::StatusOr<int64_t> NumElements(const google::protobuf::RepeatedField<int64_t>& shape) {
  int64_t n = 1;
  for (int i = 0; i < shape.size(); ++i) {
    const int64_t d = shape.Get(i);
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor shape dimension ", i, " is negative (", d, ")"));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError("tensor shape overflows int64 elements");
    }
    n *= d;
  }
  return n;
}

static absl::StatusOr<int64_t> ExpectedBytes(
    proto::DType dtype, const google::protobuf::RepeatedField<int64_t>& shape) {
  const int64_t elem = DTypeSize(dtype);
  if (elem == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor has unsupported dtype ", proto::DType_Name(dtype)));
  }
  absl::StatusOr<int64_t> n = NumElements(shape);
  if (!n.ok()) return n.status();
  if (*n > std::numeric_limits<int64_t>::max() / elem) {
    return absl::InvalidArgumentError("tensor byte size overflows int64");
  }
  return *n * elem;
}

absl::Status ValidateTensor(const proto::Tensor& tensor) {
  absl::StatusOr<int64_t> expected = ExpectedBytes(tensor.dtype(), tensor.shape());
  if (!expected.ok()) return expected.status();
  if (static_cast<int64_t>(tensor.data().size()) != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor.name(), "' has ", tensor.data().size(), " bytes of data but dtype ",
        proto::DType_Name(tensor.dtype()), " and its shape need ", *expected));
  }
  return absl::OkStatus();
}

TensorChunks SplitTensor(const proto::Tensor& tensor, int64_t chunk_bytes) {
  TensorChunks out;
  const int64_t total = static_cast<int64_t>(tensor.data().size());
  chunk_bytes = std::max<int64_t>(chunk_bytes, 1);
  out.header.set_name(tensor.name());
  out.header.set_dtype(tensor.dtype());
  *out.header.mutable_shape() = tensor.shape();
  out.header.set_total_bytes(total);
  const int64_t n = (total + chunk_bytes - 1) / chunk_bytes;
  out.header.set_num_chunks(static_cast<int32_t>(n));
  out.chunks.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t offset = i * chunk_bytes;
    proto::TensorChunk& c = out.chunks.emplace_back();
    c.set_name(tensor.name());
    c.set_index(static_cast<int32_t>(i));
    c.set_offset(offset);
    c.set_data(tensor.data().data() + offset, std::min(chunk_bytes, total - offset));
  }
  return out;
}

TensorAssembler::TensorAssembler(const proto::TensorHeader& header) : header_(header) {
  if (header_.total_bytes() > 0) data_.resize(header_.total_bytes());
}

absl::Status TensorAssembler::Add(const proto::TensorChunk& chunk) {
  if (finished_) return absl::InvalidArgumentError("chunk arrived after the tensor was finished");
  if (chunk.name() != header_.name()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk of tensor '", chunk.name(), "' sent to the assembler of '", header_.name(), "'"));
  }
  const int64_t begin = chunk.offset();
  const int64_t end = begin + static_cast<int64_t>(chunk.data().size());
  if (begin < 0 || end > header_.total_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", chunk.index(), " of tensor '", header_.name(), "' covers bytes [",
                     begin, ", ", end, ") outside [0, ", header_.total_bytes(), ")"));
  }
  for (const auto& [b, e] : ranges_) {
    if (begin < e && b < end) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk.index(), " of tensor '",
                                                     header_.name(),
                                                     "' overlaps bytes already received"));
    }
  }
  ranges_.emplace_back(begin, end);
  std::copy(chunk.data().begin(), chunk.data().end(), data_.begin() + begin);
  received_bytes_ += end - begin;
  return absl::OkStatus();
}

absl::StatusOr<proto::Tensor> TensorAssembler::Finish() {
  if (finished_) return absl::FailedPreconditionError("TensorAssembler::Finish called twice");
  if (!complete()) {
    return absl::FailedPreconditionError(absl::StrCat("tensor '", header_.name(),
                                                      "' is incomplete: ", received_bytes_, " of ",
                                                      header_.total_bytes(), " bytes received"));
  }
  finished_ = true;
  proto::Tensor t;
  t.set_name(header_.name());
  t.set_dtype(header_.dtype());
  *t.mutable_shape() = header_.shape();
  *t.mutable_data() = std::move(data_);
  absl::Status valid = ValidateTensor(t);
  if (!valid.ok()) return valid;
  return t;
}

}  // namespace troupe
