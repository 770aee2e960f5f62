#include "base/trace/chrome_trace.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace {

TEST(ChromeTraceJson, EveryEventHasNamePhTsDurPidTid) {
  ProcessSpans a{.pid = 11, .label = "driver", .host = "h", .lost = 3, .spans = {}};
  a.spans.push_back({"eval", "evaluate", "driver", 1000, 50});
  ProcessSpans b{.pid = 22, .label = "worker x", .host = "h", .lost = 0, .spans = {}};
  b.spans.push_back({"call", "Generate", "rollout-0", 1010, 20});
  b.spans.push_back({"call", "Status", "rollout-0", 1040, 1});
  b.spans.push_back({"weights", "publish", "trainer", 1050, 3});
  nlohmann::json t = nlohmann::json::parse(ChromeTraceJson({a, b}));
  ASSERT_TRUE(t["traceEvents"].is_array());
  int complete = 0;
  for (const nlohmann::json& e : t["traceEvents"]) {
    for (const char* k : {"name", "ph", "ts", "dur", "pid", "tid"}) {
      EXPECT_TRUE(e.contains(k)) << k << " missing in " << e.dump();
    }
    if (e["ph"] == "X") ++complete;
  }
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(t["otherData"]["lost_spans"], 3);
  // Two tracks in the second process: two tids, each named once.
  int thread_names = 0;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["name"] == "thread_name" && e["pid"] == 2) ++thread_names;
    if (e["name"] == "Status") {
      EXPECT_EQ(e["pid"], 2);
      EXPECT_EQ(e["tid"], 1);
      EXPECT_EQ(e["ts"], 1040);
      EXPECT_EQ(e["cat"], "call");
    }
    if (e["name"] == "publish") {
      EXPECT_EQ(e["tid"], 2);
    }
    if (e["name"] == "process_name" && e["pid"] == 1) {
      EXPECT_EQ(e["args"]["name"], "driver (pid 11 on h)");
    }
  }
  EXPECT_EQ(thread_names, 2);
}

TEST(ChromeTraceJson, BytesThatAreNotUtf8DoNotBreakTheJson) {
  ProcessSpans a{.pid = 1, .label = "x", .host = "", .lost = 0, .spans = {}};
  a.spans.push_back({"c", "bad\xff", "t", 1, 1});
  EXPECT_NO_THROW(nlohmann::json::parse(ChromeTraceJson({a})));
}

TEST(ReadRunDirSpans, ReadsTheDriverAndWorkerFilesAndNamesWhatIsWrong) {
  namespace fs = std::filesystem;
  test::TempDir tmp("chrome_trace");
  const std::string dir = tmp.Path("run");
  EXPECT_TRUE(absl::IsNotFound(ReadRunDirSpans(dir).status()));
  fs::create_directories(dir + "/cluster/logs");
  absl::StatusOr<std::vector<ProcessSpans>> none = ReadRunDirSpans(dir);
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("holds no spans"), std::string::npos);
  {
    auto d = *SpanRecorder::Create({.capacity = 4, .file = dir + "/driver.spans", .label = "d"});
    d->Record("eval", "evaluate", "driver", 1, 1);
    auto w = *SpanRecorder::Create(
        {.capacity = 4, .file = dir + "/cluster/logs/worker-a-0.spans", .label = "w"});
    w->Record("call", "Generate", "a", 2, 1);
  }
  absl::StatusOr<std::vector<ProcessSpans>> both = ReadRunDirSpans(dir);
  ASSERT_TRUE(both.ok()) << both.status();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].label, "d");
  EXPECT_EQ((*both)[1].spans.at(0).name, "Generate");
  test::WriteFile(dir + "/cluster/logs/worker-b-0.spans", "garbage");
  absl::StatusOr<std::vector<ProcessSpans>> bad = ReadRunDirSpans(dir);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("worker-b-0.spans"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace troupe
