#include "runtime/dashboard/run_record.h"

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cluster/state_store.h"
#include "runtime/cluster/worker_main.h"

namespace troupe::dashboard {
namespace {

namespace fs = std::filesystem;
// The head's tables (runtime/cluster/head: kActors, kKv).
constexpr char kActors[] = "actors";
constexpr char kKv[] = "kv";
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A new directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("run_record");
  const std::string d = root.Path(name);
  fs::remove_all(d);
  fs::create_directories(d + "/scratch");
  return d;
}

void Write(const std::string& path, const std::string& text) { test::WriteFile(path, text); }

proto::ActorInfo Actor(const std::string& id, const std::string& type, const std::string& name,
                       int64_t start_ms) {
  proto::ActorInfo a;
  a.mutable_id()->set_id(id);
  a.mutable_spec()->set_type_name(type);
  a.mutable_spec()->set_name(name);
  a.mutable_spec()->mutable_job_id()->set_id("demo");
  a.set_state(proto::DEAD);
  a.set_status_message("killed");
  a.set_start_time_ms(start_ms);
  return a;
}

std::string Stats(const std::string& id, int64_t time_ms, int calls) {
  return absl::StrCat(R"({"actor_id":")", id, R"(","incarnation":0,"pid":7,"time_ms":)", time_ms,
                      R"(,"calls":[{"caller":"driver","method":"Take","calls":)", calls,
                      R"(,"request_bytes":10,"reply_bytes":20,"errors":0,"samples":0,)",
                      R"("policy_version_sum":0,"version":-1}]})");
}

// The files of `dir` (recursively) with their sizes.
std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename() == "scratch") continue;
    out.insert(absl::StrCat(e.path().string(), " ",
                            e.is_regular_file() ? static_cast<int64_t>(e.file_size()) : -1));
  }
  return out;
}

// What an embedded cluster leaves in <run>/cluster/head.db: two actors of the job, their call
// statistics (one of an actor the table does not know), the job record, and other KV entries.
void WriteHeadDb(const std::string& run) {
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(run + "/cluster/head.db");
  ASSERT_TRUE(store.ok()) << store.status();
  for (const proto::ActorInfo& a : {Actor("aaaa", "ReplayBuffer", "demo/replay", 1796000001000),
                                    Actor("bbbb", "Trainer", "demo/trainer", 1796000000500)}) {
    ASSERT_TRUE((*store)->Put(kActors, a.id().id(), a.SerializeAsString()).ok());
  }
  const std::string prefix = kActorStatsKeyPrefix;
  ASSERT_TRUE((*store)->Put(kKv, prefix + "aaaa", Stats("aaaa", 1796000200000, 57)).ok());
  ASSERT_TRUE((*store)->Put(kKv, prefix + "gone", Stats("gone", 1796000999000, 1)).ok());
  ASSERT_TRUE((*store)
                  ->Put(kKv, "jobs/demo",
                        R"({"job_id":"demo","status":"SUCCEEDED","submitted_ms":1796000000000,)"
                        R"("start_ms":1796000000000,"end_ms":1796000216000})")
                  .ok());
  ASSERT_TRUE((*store)->Put(kKv, "collective/x", "not json").ok());
}

TEST(ReadRunRecord, ReadsActorsStatisticsAndTimesOfAnEmbeddedClustersRun) {
  const std::string dir = TestDir("embedded");
  const std::string run = dir + "/run";
  WriteHeadDb(run);
  // Metrics from 10 s after the start (the SFT warm start came first) to before the job ended.
  Write(run + "/metrics.jsonl",
        "{\"step\":0,\"time\":1796000010.25,\"val/accuracy\":0.4}\n"
        "{\"step\":1,\"time\":1796000011.5,\"actor/loss\":1}\n"
        "{\"step\":2,\"time\":1796000210.75,\"val/accuracy\":0.8}\n");
  const std::set<std::string> before = Listing(run);

  const RunRecord r = ReadRunRecord(run, dir + "/scratch");
  EXPECT_THAT(r.problems, IsEmpty());
  ASSERT_EQ(r.actors.size(), 2u);
  EXPECT_EQ(r.actors[0].id().id(), "aaaa");
  EXPECT_EQ(r.actors[0].spec().type_name(), "ReplayBuffer");
  EXPECT_EQ(r.actors[0].status_message(), "killed");
  EXPECT_EQ(r.actors[1].spec().name(), "demo/trainer");
  // Statistics of the known actors only.
  ASSERT_EQ(r.call_stats.size(), 1u);
  EXPECT_THAT(r.call_stats.at("aaaa"), HasSubstr("\"calls\":57"));
  // Start: the job record's (before the trainer's creation and the first metrics); end: the job
  // record's (after the last metrics and statistics).
  EXPECT_EQ(r.start_ms, 1796000000000);
  EXPECT_EQ(r.end_ms, 1796000216000);
  // The run directory is as it was (no -wal / -shm beside head.db), and the copy is gone.
  EXPECT_EQ(Listing(run), before);
  EXPECT_TRUE(fs::is_empty(dir + "/scratch"));
}

TEST(ReadRunRecord, WithoutAJobRecordTakesTheEarliestAndLatestTimesRecorded) {
  const std::string dir = TestDir("no_job_record");
  const std::string run = dir + "/run";
  {
    absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(run + "/cluster/head.db");
    ASSERT_TRUE(store.ok()) << store.status();
    const proto::ActorInfo a = Actor("aaaa", "ReplayBuffer", "demo/replay", 1796000001000);
    ASSERT_TRUE((*store)->Put(kActors, "aaaa", a.SerializeAsString()).ok());
    ASSERT_TRUE(
        (*store)
            ->Put(kKv, std::string(kActorStatsKeyPrefix) + "aaaa", Stats("aaaa", 1796000300000, 3))
            .ok());
  }
  // The last record is being written (no newline yet): the last complete one counts.
  Write(run + "/metrics.jsonl",
        "{\"step\":0,\"time\":1796000002.5}\n{\"step\":1,\"time\":1796000290}\n{\"step\":2,\"ti");
  const RunRecord r = ReadRunRecord(run, dir + "/scratch");
  EXPECT_THAT(r.problems, IsEmpty());
  EXPECT_EQ(r.start_ms, 1796000001000);  // the actor's creation
  EXPECT_EQ(r.end_ms, 1796000300000);    // its statistics' last publication
}

TEST(ReadRunRecord, ARunWithOnlyMetricsHasItsMetricsTimesAndNoActors) {
  const std::string dir = TestDir("metrics_only");
  Write(dir + "/run/metrics.jsonl",
        "{\"step\":1,\"time\":1796225343.5,\"x\":1}\n{\"step\":2,\"time\":1796225559.5,\"x\":2}\n");
  const RunRecord r = ReadRunRecord(dir + "/run", dir + "/scratch");
  EXPECT_THAT(r.problems, IsEmpty());
  EXPECT_THAT(r.actors, IsEmpty());
  EXPECT_EQ(r.start_ms, 1796225343500);
  EXPECT_EQ(r.end_ms, 1796225559500);
  // Nothing recorded a time: 0 (unknown), not the time of reading.
  Write(dir + "/bare/summary.json", "{}\n");
  const RunRecord bare = ReadRunRecord(dir + "/bare", dir + "/scratch");
  EXPECT_EQ(bare.start_ms, 0);
  EXPECT_EQ(bare.end_ms, 0);
}

TEST(ReadRunRecord, ACorruptHeadDatabaseIsNamedNotFatal) {
  const std::string dir = TestDir("corrupt");
  Write(dir + "/run/cluster/head.db", std::string(8192, 'x'));
  Write(dir + "/run/metrics.jsonl", "{\"step\":1,\"time\":1796225343.5,\"x\":1}\n");
  const RunRecord r = ReadRunRecord(dir + "/run", dir + "/scratch");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_THAT(r.problems[0], HasSubstr(dir + "/run/cluster/head.db: "));
  EXPECT_THAT(r.actors, IsEmpty());
  EXPECT_EQ(r.start_ms, 1796225343500);  // what else was recorded is still read
  EXPECT_TRUE(fs::is_empty(dir + "/scratch"));
}

}  // namespace
}  // namespace troupe::dashboard
