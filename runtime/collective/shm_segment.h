// SharedSegment: a block of memory that processes of one user on one machine share, named by a
// short description string that travels through the KV store. The creator's memory is an
// anonymous memfd with its pages reserved up front (fallocate), so a full tmpfs fails Create
// instead of raising SIGBUS at first touch. Another process maps it through
// /proc/<pid>/fd/<fd> and checks a random nonce, so a process on another machine (or of another
// user, or after the creator died and its pid was reused) fails Open instead of mapping the wrong
// memory. Nothing is left behind in the file system; the memory lives while any process maps it.
//
//   TROUPE_ASSIGN_OR_RETURN(auto seg, SharedSegment::Create(bytes, "weights"));
//   kv->Put(key, seg->description());                   // elsewhere:
//   TROUPE_ASSIGN_OR_RETURN(auto seg, SharedSegment::Open(description, "weights"));
//
// Users: ShmRing (broadcast pieces) and the in-place weight buffers of weight_sync.h.
// Thread-safety: the object is immutable; what the memory holds is the user's business.
#ifndef TROUPE_RUNTIME_COLLECTIVE_SHM_SEGMENT_H_
#define TROUPE_RUNTIME_COLLECTIVE_SHM_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::collective {

class SharedSegment {
 public:
  // Makes `bytes` (> 0) bytes of zeroed shared memory. `what` names the user in errors.
  // RESOURCE_EXHAUSTED if the memory cannot be reserved.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Create(size_t bytes,
                                                               absl::string_view what);
  // Maps the segment `description` (another process's description()). INVALID_ARGUMENT if it is
  // malformed; UNAVAILABLE if that segment cannot be reached from here.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Open(const std::string& description,
                                                             absl::string_view what);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // size() bytes, page-aligned.
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // "pid:fd:nonce:size".
  const std::string& description() const { return description_; }

 private:
  SharedSegment(int fd, void* base, size_t mapped, size_t size, std::string description);

  const int fd_;  // the creator keeps its memfd open (so others can reach it); -1 elsewhere
  void* const base_;
  const size_t mapped_;
  uint8_t* const data_;
  const size_t size_;
  const std::string description_;
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_SHM_SEGMENT_H_
