// Splitting a troupe.proto.Tensor into bounded-size chunks and reassembling it.
//
// Large tensors (hundreds of MB of weights) cannot travel as one protobuf message: protobuf caps a
// message at 2 GiB and gRPC's default receive limit is 4 MiB. A sender calls SplitTensor to get a
// TensorHeader plus TensorChunks of at most `chunk_bytes` each; the receiver feeds them, in any
// order, to a TensorAssembler, which checks that they tile the tensor exactly.
//
// Example:
//   troupe::TensorChunks parts = troupe::SplitTensor(big, /*chunk_bytes=*/4 << 20);
//   troupe::TensorAssembler assembler(parts.header);
//   for (const auto& c : parts.chunks) RETURN_IF_ERROR(assembler.Add(c));
//   absl::StatusOr<troupe::proto::Tensor> whole = assembler.Finish();
//
// Thread-safety: free functions are thread-safe; a TensorAssembler is not (one per transfer).
#ifndef TROUPE_BASE_TENSOR_CODEC_H_
#define TROUPE_BASE_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/core.pb.h"

namespace troupe {

// Size in bytes of one element of `dtype`; 0 for DTYPE_UNSPECIFIED or unknown values.
int64_t DTypeSize(proto::DType dtype);

// Product of `shape`; 1 for a scalar (empty shape). Returns InvalidArgument for a negative
// dimension or on overflow of int64.
absl::StatusOr<int64_t> NumElements(const google::protobuf::RepeatedField<int64_t>& shape);

// OK iff tensor.data() holds exactly NumElements(shape) * DTypeSize(dtype) bytes.
absl::Status ValidateTensor(const proto::Tensor& tensor);

struct TensorChunks {
  proto::TensorHeader header;
  std::vector<proto::TensorChunk> chunks;
};

// Splits `tensor` into chunks of at most `chunk_bytes` (> 0) bytes. A tensor with no data yields
// zero chunks. Does not validate `tensor`; call ValidateTensor first if it came from outside.
TensorChunks SplitTensor(const proto::Tensor& tensor, int64_t chunk_bytes);

// Rebuilds one tensor from its header and chunks.
class TensorAssembler {
 public:
  explicit TensorAssembler(const proto::TensorHeader& header);

  // Copies `chunk` into place. InvalidArgument if the chunk names another tensor, lies outside
  // the tensor, overlaps data already received, or arrives after Finish.
  absl::Status Add(const proto::TensorChunk& chunk);

  // True once every byte of the tensor has arrived.
  bool complete() const { return received_bytes_ == header_.total_bytes(); }

  // Returns the tensor. FailedPrecondition if bytes are missing; InvalidArgument if the header
  // is inconsistent (dtype/shape disagree with total_bytes). Call at most once.
  absl::StatusOr<proto::Tensor> Finish();

 private:
  proto::TensorHeader header_;
  std::string data_;
  // Received [begin, end) byte ranges, kept to reject overlaps.
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  int64_t received_bytes_ = 0;
  bool finished_ = false;
};

}  // namespace troupe

#endif  // TROUPE_BASE_TENSOR_CODEC_H_
