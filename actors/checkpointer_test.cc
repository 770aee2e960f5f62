#include "actors/checkpointer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "actors/policy_util.h"
#include "actors/tiny_policy.h"
#include "actors/trainer_core.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "models/hf_checkpoint.h"
#include "models/tensor_proto.h"
#include "models/tokenizers/test_tokenizer_files.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::actors {
namespace {

namespace fs = std::filesystem;

// A new, empty directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("checkpointer_test");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

proto::CheckpointRequest Request(int64_t step, const std::string& driver_state) {
  proto::CheckpointRequest req;
  req.set_step(step);
  req.set_weight_version(step);
  req.set_driver_state_json(driver_state);
  req.set_trainer_state("state");
  models::ModelConfig config = MicroModelConfig();
  config.vocab_size = 15;  // the arithmetic alphabet's ids
  req.set_model_config_json(config.ToJson());
  return req;
}

// The pid of a process that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(Checkpointer, WritesCompleteCheckpointsAndKeepsTheNewest) {
  const std::string dir = TestDir("keep");
  for (int64_t step : {2, 4, 6}) {
    absl::StatusOr<std::string> path = WriteCheckpoint(dir, /*keep=*/2, Request(step, "{}"));
    ASSERT_TRUE(path.ok()) << path.status();
  }
  EXPECT_FALSE(fs::exists(dir + "/step_00000002"));
  EXPECT_TRUE(fs::exists(dir + "/step_00000004/meta.json"));
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, dir + "/step_00000006");
  EXPECT_EQ(test::ReadFile(*latest + "/trainer_state.pt"), "state");
  // The `latest` pointer: a relative symlink to the newest, kept there by a retried older step.
  EXPECT_EQ(fs::read_symlink(dir + "/latest").string(), "step_00000006");
  ASSERT_TRUE(WriteCheckpoint(dir, /*keep=*/2, Request(4, "{}")).ok());
  EXPECT_EQ(fs::read_symlink(dir + "/latest").string(), "step_00000006");
  EXPECT_EQ(test::ReadFile(dir + "/latest/trainer_state.pt"), "state");
}

TEST(Checkpointer, RewritingAStepReplacesItAndLeavesNoScratch) {
  const std::string dir = TestDir("rewrite");
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(4, "first")).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(4, "second")).ok());
  EXPECT_EQ(test::ReadFile(dir + "/step_00000004/driver_state.json"), "second");
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().rfind('.', 0), std::string::npos)
        << "scratch left behind: " << e.path();
  }
}

TEST(Checkpointer, RemovesTheScratchOfDeadWritersOnly) {
  const std::string dir = TestDir("scratch");
  const pid_t dead = DeadPid();
  const std::string abandoned = absl::StrCat(dir, "/.tmp-step_00000004-", dead);
  const std::string aside = absl::StrCat(dir, "/.old-step_00000002-", dead);
  const std::string live = absl::StrCat(dir, "/.tmp-step_00000006-", ::getpid());
  const std::string users = dir + "/.tmp-notes";
  for (const std::string& d : {abandoned, aside, live, users}) fs::create_directories(d);
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(2, "{}")).ok());

  const AbandonedScratch first = RecoverAbandonedScratch(dir);
  EXPECT_EQ(first.removed, 2);
  EXPECT_EQ(first.restored, 0) << "step 2 has its complete copy: the one moved aside is scratch";
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_FALSE(fs::exists(aside));
  EXPECT_TRUE(fs::exists(live)) << "a live writer's scratch was removed";
  EXPECT_TRUE(fs::exists(users)) << "a directory troupe did not make was removed";
  EXPECT_TRUE(fs::exists(dir + "/step_00000002/meta.json"));
  const AbandonedScratch again = RecoverAbandonedScratch(dir);
  EXPECT_EQ(again.removed, 0);
  EXPECT_EQ(again.restored, 0);
}

// A retried step's writer moves the earlier copy aside (step_N -> .old-step_N-PID), then renames
// its new copy into place. Killed between the two, it leaves the step only under the scratch
// name: the next checkpointer must put it back, not delete it as scratch.
TEST(Checkpointer, AStepLeftOnlyMovedAsideByAKilledWriterIsRestoredNotDeleted) {
  const std::string dir = TestDir("between_renames");
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(2, "two")).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(4, "four")).ok());
  // The killed writer's state: step 4 moved aside, its new copy unfinished under .tmp-.
  const pid_t dead = DeadPid();
  const std::string aside = absl::StrCat(dir, "/.old-step_00000004-", dead);
  const std::string unfinished = absl::StrCat(dir, "/.tmp-step_00000004-", dead);
  fs::rename(dir + "/step_00000004", aside);
  fs::create_directories(unfinished);
  test::WriteFile(unfinished + "/meta.json", "{\"step\"");  // torn
  ASSERT_EQ(LatestCheckpoint(dir).value_or(""), dir + "/step_00000002");

  // A new checkpointer in the directory (the restarted actor) recovers it on start-up.
  proto::CheckpointerConfig config;
  config.set_dir(dir);
  config.set_keep(3);
  Checkpointer restarted(config);
  EXPECT_TRUE(fs::exists(dir + "/step_00000004/meta.json")) << "the only copy of step 4 is gone";
  EXPECT_EQ(test::ReadFile(dir + "/step_00000004/driver_state.json"), "four");
  EXPECT_FALSE(fs::exists(aside));
  EXPECT_FALSE(fs::exists(unfinished)) << "the unfinished copy is scratch";
  EXPECT_EQ(LatestCheckpoint(dir).value_or(""), dir + "/step_00000004");
  EXPECT_EQ(fs::read_symlink(dir + "/latest").string(), "step_00000004");
  // And the retry it was making goes through afterwards.
  ASSERT_TRUE(restarted.Save(Request(4, "four again")).ok());
  EXPECT_EQ(test::ReadFile(dir + "/step_00000004/driver_state.json"), "four again");
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_NE(e.path().filename().string()[0], '.') << "scratch left behind: " << e.path();
  }
}

// Several dead writers' copies of the same step moved aside (one killed between its renames, the
// next too): one is restored, the others removed.
TEST(Checkpointer, OfSeveralCopiesMovedAsideOneIsRestored) {
  const std::string dir = TestDir("two_aside");
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(6, "six")).ok());
  const pid_t a = DeadPid(), b = DeadPid();
  fs::rename(dir + "/step_00000006", absl::StrCat(dir, "/.old-step_00000006-", a));
  fs::copy(absl::StrCat(dir, "/.old-step_00000006-", a),
           absl::StrCat(dir, "/.old-step_00000006-", b), fs::copy_options::recursive);
  const AbandonedScratch s = RecoverAbandonedScratch(dir);
  EXPECT_EQ(s.restored, 1);
  EXPECT_EQ(s.removed, 1);
  EXPECT_EQ(test::ReadFile(dir + "/step_00000006/driver_state.json"), "six");
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_NE(e.path().filename().string()[0], '.') << "scratch left behind: " << e.path();
  }
}

TEST(Checkpointer, WritesAHuggingFaceDirectoryThatLoadsBackWithEveryEosAsAStopId) {
  const std::string dir = TestDir("hf");
  const std::string policy = dir + "/policy";
  ASSERT_TRUE(WriteRandomPolicy(policy, MicroModelConfig(), /*seed=*/5).ok());
  absl::StatusOr<models::HfCheckpoint> source = models::LoadHfCheckpoint(policy);
  ASSERT_TRUE(source.ok()) << source.status();
  proto::CheckpointRequest req = Request(3, "{}");
  absl::StatusOr<proto::TensorMap> weights =
      models::TensorMapToProto(models::ModuleTensors(*source->model), 3);
  ASSERT_TRUE(weights.ok());
  *req.mutable_weights() = *weights;
  req.set_model_config_json(source->files.config.ToJson());
  req.set_tokenizer_json(source->files.tokenizer_json);
  req.set_generation_config_json(R"({"eos_token_id": [3, 7], "temperature": 0.6})");
  req.set_tokenizer_config_json(R"({"model_max_length": 64})");
  absl::StatusOr<std::string> path = WriteCheckpoint(dir + "/ckpt", 0, req);
  ASSERT_TRUE(path.ok()) << path.status();

  absl::StatusOr<models::HfCheckpoint> back = models::LoadHfCheckpoint(*path);
  ASSERT_TRUE(back.ok()) << back.status();
  models::NamedTensors a = models::ModuleTensors(*source->model);
  models::NamedTensors b = models::ModuleTensors(*back->model);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].second.equal(b[i].second)) << a[i].first;
  ASSERT_TRUE(back->files.generation.has_value());
  EXPECT_EQ(back->files.generation->eos_token_ids, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(back->files.tokenizer_config_json, R"({"model_max_length": 64})");

  // A policy loaded from the checkpoint stops at both generation_config ids and the tokenizer's.
  absl::StatusOr<PolicyModel> loaded = LoadPolicy(*path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->stop_token_ids[0], 3);
  EXPECT_EQ(loaded->stop_token_ids[1], 7);
  const std::optional<int32_t> eos = loaded->tokenizer->eos_id();
  ASSERT_TRUE(eos.has_value());
  EXPECT_NE(std::find(loaded->stop_token_ids.begin(), loaded->stop_token_ids.end(), *eos),
            loaded->stop_token_ids.end());

  // A request whose config does not parse writes nothing.
  proto::CheckpointRequest bad = req;
  bad.set_step(4);
  bad.set_model_config_json(R"({"model_type": "gpt2"})");
  absl::StatusOr<std::string> refused = WriteCheckpoint(dir + "/ckpt", 0, bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("config.json: key 'model_type'"), std::string::npos)
      << refused.status();
  EXPECT_FALSE(fs::exists(dir + "/ckpt/step_00000004"));
}

TEST(Checkpointer, LatestCheckpointSaysWhichDirectoryHasNone) {
  const std::string dir = TestDir("empty");
  fs::create_directories(dir + "/.tmp-step_00000002-1");
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(latest.status().message().find(dir), std::string::npos) << latest.status();
}

// The trainer's snapshot carries its tokenizer written out from the loaded object: the policy's
// tokenizer.json is formatted otherwise (test_tokenizer_files.h), the checkpoint's is the
// serialization, and it loads back to the same encoding with the chat template kept.
TEST(Checkpointer, WritesTheTrainersTokenizerSerializedSoItLoadsBackToTheSameEncoding) {
  const std::string dir = TestDir("serialized_tokenizer");
  absl::StatusOr<std::string> source = models::WriteTestBpeTokenizer(dir + "/source");
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer = models::LoadTokenizer(*source);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string policy = dir + "/policy";
  const std::string source_json = test::ReadFile(*source + "/tokenizer.json");
  ASSERT_TRUE(
      WriteRandomPolicy(policy, MicroModelConfig(), /*seed=*/5, **tokenizer, source_json).ok());
  fs::copy_file(*source + "/tokenizer_config.json", policy + "/tokenizer_config.json");

  proto::TrainerConfig config;
  config.set_model_dir(policy);
  absl::StatusOr<std::unique_ptr<TrainerCore>> core = TrainerCore::Create(config);
  ASSERT_TRUE(core.ok()) << core.status();
  absl::StatusOr<proto::CheckpointRequest> snapshot = (*core)->Snapshot(Request(1, "{}"));
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  absl::StatusOr<std::string> path = WriteCheckpoint(dir + "/ckpt", 0, *snapshot);
  ASSERT_TRUE(path.ok()) << path.status();

  const std::string written = test::ReadFile(*path + "/tokenizer.json");
  // Whole files: compared as booleans so a failure does not print 300 vocabulary entries.
  EXPECT_TRUE(written != source_json) << "the policy's tokenizer.json was copied";
  EXPECT_TRUE(written == (*tokenizer)->ToTokenizerJson().value()) << "not the serialization";
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> back = models::LoadTokenizer(*path);
  ASSERT_TRUE(back.ok()) << back.status();
  for (const std::string& text : models::TokenizerTestTexts()) {
    EXPECT_EQ((*back)->Encode(text).value(), (*tokenizer)->Encode(text).value()) << text;
  }
  EXPECT_EQ((*back)->bos_id(), (*tokenizer)->bos_id());
  EXPECT_EQ((*back)->eos_id(), (*tokenizer)->eos_id());
  EXPECT_EQ((*back)->pad_id(), (*tokenizer)->pad_id());
  const nlohmann::json written_config =
      nlohmann::json::parse(test::ReadFile(*path + "/tokenizer_config.json"));
  EXPECT_EQ(written_config["chat_template"], std::string(models::kTestChatTemplate));
  EXPECT_EQ(written_config["model_max_length"], 512);
  EXPECT_EQ(written_config["eos_token"], std::string("<|im_end|>"));  // was the object form
}

// A character tokenizer has no tokenizer_config.json of its own: the policy's (if any) is kept.
TEST(Checkpointer, KeepsTheTokenizerConfigBesideACharacterTokenizerAsItIs) {
  const std::string dir = TestDir("char_tokenizer");
  const std::string policy = dir + "/policy";
  ASSERT_TRUE(WriteRandomPolicy(policy, MicroModelConfig(), /*seed=*/5).ok());
  const std::string config_text = R"({"chat_template": "{{ messages[0].content }}"})";
  test::WriteFile(policy + "/tokenizer_config.json", config_text);
  proto::TrainerConfig config;
  config.set_model_dir(policy);
  absl::StatusOr<std::unique_ptr<TrainerCore>> core = TrainerCore::Create(config);
  ASSERT_TRUE(core.ok()) << core.status();
  absl::StatusOr<proto::CheckpointRequest> snapshot = (*core)->Snapshot(Request(1, "{}"));
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->tokenizer_config_json(), config_text);
  EXPECT_EQ(snapshot->tokenizer_json(), test::ReadFile(policy + "/tokenizer.json"));
}

}  // namespace
}  // namespace troupe::actors
