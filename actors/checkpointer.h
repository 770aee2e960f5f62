// Checkpointer: writes RL checkpoints asynchronously (the trainer hands a snapshot over and
// goes on), atomically, keeping the newest `keep`.
//
// A checkpoint is a directory <dir>/step_<NNNNNNNN>/ holding
//   a Hugging Face model directory (models/hf_checkpoint.h, WriteHfModelFiles): config.json,
//     model.safetensors (or shards + index above 5 GB), tokenizer.json, and generation_config.json
//     / tokenizer_config.json when the request carries them; models::LoadHfCheckpoint and
//     LoadPolicy read it
//   trainer_state.pt    optimizer, schedule step, RNG state (trainers::Trainer::Save)
//   driver_state.json   data cursor, step, weight version, metrics state (the driver's)
//   replay_buffer.pb    the replay buffer's ReplayState (groups waiting, counters), if given
//   meta.json           {"step": N, "weight_version": V}
// It is written under a temporary name, every file fsynced, then renamed into place and the
// parent fsynced: a directory named step_* is always complete. Writing a step that already
// exists (a retry) moves the earlier copy aside until the new one is in place. Older ones beyond
// `keep` are removed after the new one is in place. <dir>/latest is a relative symlink to the
// newest complete checkpoint (like Hugging Face Trainer's and verl's "latest" markers), replaced
// atomically after each write. A new Checkpointer (and a resumed run, before it looks for the
// newest checkpoint) recovers what dead writers left behind (RecoverAbandonedScratch): a step
// that was moved aside and never replaced is put back, the rest of their scratch is removed.
// Config: proto::CheckpointerConfig (proto/actor_config.proto): the directory, and how many of
// the newest checkpoints to keep (0 = all).
#ifndef TROUPE_ACTORS_CHECKPOINTER_H_
#define TROUPE_ACTORS_CHECKPOINTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"

namespace troupe::actors {

// Writes one checkpoint into `dir` (see the file comment) and prunes to `keep`; returns its path.
// INVALID_ARGUMENT (nothing written) if the request's config.json or generation_config.json does
// not parse, naming the file and key.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int keep,
                                            const proto::CheckpointRequest& req);

// What RecoverAbandonedScratch did.
struct AbandonedScratch {
  int restored = 0;  // ".old-step_N-PID" directories renamed back to "step_N"
  int removed = 0;   // scratch directories removed
};

// Recovers what writers killed mid-checkpoint left under `dir`: the scratch entries
// (".tmp-step_N-PID", ".old-step_N-PID") whose writing process no longer exists on this machine.
//   - ".old-step_N-PID" with no "step_N" beside it: the writer of a retried step moved the
//     earlier copy aside and died before its new copy took the name, so this complete copy is
//     the step's only one; it is renamed back to "step_N" (one of them if several).
//   - every other such entry is removed (".tmp-*": unfinished; ".old-*" with "step_N" present:
//     the replaced copy).
// Complete checkpoints, scratch of live writers and names troupe does not make are left alone.
AbandonedScratch RecoverAbandonedScratch(const std::string& dir);

// The newest complete checkpoint directory under `dir`; NOT_FOUND naming `dir` if none.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);

class Checkpointer : public Actor {
 public:
  // Reads proto::CheckpointerConfig from the context (an unknown field fails the spawn).
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Create(const ActorContext& ctx);
  explicit Checkpointer(const proto::CheckpointerConfig& config);
  absl::StatusOr<proto::CheckpointReply> Save(const proto::CheckpointRequest& req);

 private:
  std::string dir_;
  int keep_;
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_CHECKPOINTER_H_
