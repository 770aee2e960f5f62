#include "metrics/metrics_logger.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "base/metrics/metrics_reader.h"
#include "base/metrics/metrics_record.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/tfevents_test_reader.h"

namespace troupe::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const absl::Time kT0 = absl::FromUnixSeconds(1796200000);

// A directory in this binary's temporary directory (removed when it exits); not created yet.
std::string FreshDir(const std::string& name) {
  static test::TempDir root("metrics_logger");
  const std::string dir = root.Path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(test::ReadFile(path), '\n', absl::SkipEmpty());
}

std::vector<int64_t> Steps(const std::string& path) {
  std::vector<int64_t> steps;
  for (const std::string& line : Lines(path)) {
    absl::StatusOr<MetricsRecord> r = DecodeMetricsRecord(line);
    EXPECT_TRUE(r.ok()) << line;
    if (r.ok()) steps.push_back(r->step);
  }
  return steps;
}

std::unique_ptr<MetricsLogger> OpenOrDie(const std::string& dir,
                                         const MetricsLoggerOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<MetricsLogger>> logger = MetricsLogger::Open(dir, options);
  EXPECT_TRUE(logger.ok()) << logger.status();
  return logger.ok() ? *std::move(logger) : nullptr;
}

TEST(MetricsLogger, WritesOneJsonLinePerLogCallVisibleBeforeItReturns) {
  const std::string dir = FreshDir("lines");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  EXPECT_EQ(logger->jsonl_path(), dir + "/metrics.jsonl");
  ASSERT_TRUE(
      logger->Log(1, {{"reward/mean", 0.5}, {"train/kl", 0.01}}, {}, kT0 + absl::Milliseconds(500))
          .ok());
  // Read while the logger is still open: the line was flushed.
  EXPECT_EQ(test::ReadFile(logger->jsonl_path()),
            "{\"step\":1,\"time\":1796200000.5,\"reward/mean\":0.5,\"train/kl\":0.01}\n");
  ASSERT_TRUE(logger->Log(2, {{"reward/mean", 0.75}}, {}, kT0 + absl::Seconds(2)).ok());
  EXPECT_THAT(Lines(logger->jsonl_path()),
              ElementsAre(HasSubstr("\"step\":1"),
                          "{\"step\":2,\"time\":1796200002.0,\"reward/mean\":0.75}"));
}

TEST(MetricsLogger, KeepsHistogramsOutOfTheJsonlFile) {
  const std::string dir = FreshDir("histograms");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  ASSERT_TRUE(logger->Log(3, {{"x", 1}}, {{"rollout/staleness", {2, 0, 2, 1, 0, 2}}}, kT0).ok());
  // A histogram-only call writes no line at all (its step still orders later calls).
  ASSERT_TRUE(logger->Log(4, {}, {{"rollout/staleness", {1}}}, kT0).ok());
  EXPECT_EQ(test::ReadFile(logger->jsonl_path()), "{\"step\":3,\"time\":1796200000.0,\"x\":1.0}\n");
  EXPECT_FALSE(logger->Log(3, {{"x", 2}}, {}, kT0).ok());
}

TEST(MetricsLogger, UsesTheConfiguredNumberOfHistogramBuckets) {
  const std::string dir = FreshDir("buckets");
  MetricsLoggerOptions options;
  options.histogram_buckets = 4;
  auto logger = OpenOrDie(dir, options);
  ASSERT_NE(logger, nullptr);
  ASSERT_TRUE(logger->Log(0, {}, {{"adv", {-1.0, -0.5, 0.1, 0.2, 1.0}}}, kT0).ok());
  absl::StatusOr<std::vector<testing::Event>> events =
      testing::ReadEvents(logger->event_file_path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_THAT(*events, SizeIs(3));
  const auto& histo = (*events)[2].summary().value(0).histo();
  EXPECT_EQ((*events)[2].summary().value(0).tag(), "adv");
  EXPECT_THAT(histo.bucket_limit(), ElementsAre(-0.5, 0.0, 0.5, 1.0));
  EXPECT_THAT(histo.bucket(), ElementsAre(1, 1, 2, 1));
}

TEST(MetricsLogger, WritesNonFiniteScalarsAsStrings) {
  const std::string dir = FreshDir("nonfinite");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  ASSERT_TRUE(logger
                  ->Log(0,
                        {{"loss", std::numeric_limits<double>::quiet_NaN()},
                         {"grad_norm", std::numeric_limits<double>::infinity()}},
                        {}, kT0)
                  .ok());
  EXPECT_EQ(test::ReadFile(logger->jsonl_path()),
            "{\"step\":0,\"time\":1796200000.0,\"grad_norm\":\"Infinity\",\"loss\":\"NaN\"}\n");
}

TEST(MetricsLogger, ReopeningAppendsAndContinuesFromTheLastStep) {
  const std::string dir = FreshDir("append");
  {
    auto logger = OpenOrDie(dir);
    ASSERT_NE(logger, nullptr);
    ASSERT_TRUE(logger->Log(1, {{"x", 1}}, {}, kT0).ok());
    ASSERT_TRUE(logger->Log(2, {{"x", 2}}, {}, kT0).ok());
  }
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  EXPECT_EQ(logger->last_step(), 2);
  EXPECT_EQ(logger->Log(1, {{"x", 9}}, {}, kT0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(logger->Log(3, {{"x", 3}}, {}, kT0).ok());
  EXPECT_THAT(Steps(logger->jsonl_path()), ElementsAre(1, 2, 3));
}

TEST(MetricsLogger, ResumingDropsTheRecordsAfterTheResumeStep) {
  const std::string dir = FreshDir("resume");
  {
    auto logger = OpenOrDie(dir);
    ASSERT_NE(logger, nullptr);
    for (int step = 1; step <= 5; ++step) {
      ASSERT_TRUE(logger->Log(step, {{"reward", 0.1 * step}}, {}, kT0).ok());
    }
  }
  MetricsLoggerOptions options;
  options.resume_step = 3;  // The crashed run's checkpoint.
  auto logger = OpenOrDie(dir, options);
  ASSERT_NE(logger, nullptr);
  EXPECT_THAT(Steps(logger->jsonl_path()), ElementsAre(1, 2, 3));
  EXPECT_EQ(logger->last_step(), 3);
  ASSERT_TRUE(logger->Log(4, {{"reward", 0.99}}, {}, kT0).ok());
  absl::StatusOr<MetricsSeries> series = ReadMetrics(logger->jsonl_path());
  ASSERT_TRUE(series.ok()) << series.status();
  const std::vector<ScalarPoint>& reward = series->scalars.at("reward");
  ASSERT_THAT(reward, SizeIs(4));
  EXPECT_EQ(reward[3].step, 4);
  EXPECT_EQ(reward[3].value, 0.99);  // The resumed run's value, not the crashed run's 0.4.
}

TEST(MetricsLogger, ResumingFromMinusOneDiscardsEveryRecord) {
  const std::string dir = FreshDir("resume_all");
  {
    auto logger = OpenOrDie(dir);
    ASSERT_NE(logger, nullptr);
    ASSERT_TRUE(logger->Log(1, {{"x", 1}}, {}, kT0).ok());
  }
  MetricsLoggerOptions options;
  options.resume_step = -1;
  auto logger = OpenOrDie(dir, options);
  ASSERT_NE(logger, nullptr);
  EXPECT_EQ(test::ReadFile(logger->jsonl_path()), "");
  EXPECT_TRUE(logger->Log(0, {{"x", 0}}, {}, kT0).ok());
}

TEST(MetricsLogger, DropsATornFinalLineOnOpen) {
  const std::string dir = FreshDir("torn");
  test::WriteFile(
      dir + "/metrics.jsonl",
      "{\"step\":1,\"time\":1.0,\"x\":1}\n{\"step\":2,\"time\":2.0,\"x\":2}\n{\"step\":3,\"ti");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  EXPECT_EQ(logger->last_step(), 2);
  ASSERT_TRUE(logger->Log(3, {{"x", 3}}, {}, kT0).ok());
  EXPECT_THAT(Steps(logger->jsonl_path()), ElementsAre(1, 2, 3));
}

TEST(MetricsLogger, RefusesToOpenAFileWithACorruptLineAndLeavesItAlone) {
  const std::string dir = FreshDir("corrupt");
  const std::string text = "{\"step\":1,\"time\":1.0}\nnot json\n{\"step\":3,\"time\":3.0}\n";
  test::WriteFile(dir + "/metrics.jsonl", text);
  MetricsLoggerOptions options;
  options.resume_step = 1;
  absl::StatusOr<std::unique_ptr<MetricsLogger>> logger = MetricsLogger::Open(dir, options);
  EXPECT_EQ(logger.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(logger.status().message(), HasSubstr(dir + "/metrics.jsonl:2"));
  EXPECT_EQ(test::ReadFile(dir + "/metrics.jsonl"), text);
}

TEST(MetricsLogger, RejectsBadInputWithoutWritingAnything) {
  const std::string dir = FreshDir("invalid");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  ASSERT_TRUE(logger->Log(5, {{"x", 1}}, {}, kT0).ok());
  const std::string before = test::ReadFile(logger->jsonl_path());
  struct Case {
    int64_t step;
    Scalars scalars;
    HistogramValues histograms;
    const char* message;
  };
  const std::vector<Case> cases = {
      {4, {{"x", 1}}, {}, "below the last step 5"},
      {-1, {{"x", 1}}, {}, "must be >= 0"},
      {6, {{"", 1}}, {}, "empty"},
      {6, {{"step", 1}}, {}, "reserved"},
      {6, {{"time", 1}}, {}, "reserved"},
      {6, {{"bad\nname", 1}}, {}, "control character"},
      {6, {{"x", 1}}, {{"x", {1, 2}}}, "both a scalar and a histogram"},
      {6, {}, {{"h", {1, std::numeric_limits<double>::quiet_NaN()}}}, "histogram 'h'"},
  };
  for (const Case& c : cases) {
    absl::Status status = logger->Log(c.step, c.scalars, c.histograms, kT0);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  EXPECT_EQ(test::ReadFile(logger->jsonl_path()), before);
}

TEST(MetricsLogger, RejectsBadOptionsNamingThem) {
  const std::string dir = FreshDir("options");
  MetricsLoggerOptions options;
  options.histogram_buckets = 0;
  EXPECT_THAT(MetricsLogger::Open(dir, options).status().message(), HasSubstr("histogram_buckets"));
  options = {};
  options.resume_step = -2;
  EXPECT_THAT(MetricsLogger::Open(dir, options).status().message(), HasSubstr("resume_step"));
  options = {};
  options.run_name = "a/b";
  EXPECT_THAT(MetricsLogger::Open(dir, options).status().message(), HasSubstr("run_name"));
}

TEST(MetricsLogger, WritesTheSameValuesToTensorBoard) {
  const std::string dir = FreshDir("tensorboard");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  ASSERT_TRUE(logger
                  ->Log(1, {{"reward/mean", 0.41}, {"train/kl", 0.002}},
                        {{"rollout/staleness", {0, 1, 1}}}, kT0 + absl::Seconds(1))
                  .ok());
  ASSERT_TRUE(logger->Log(2, {{"reward/mean", 0.5}}, {}, kT0 + absl::Seconds(2)).ok());

  const std::vector<std::string> files = testing::ListEventFiles(dir + "/tb");
  ASSERT_THAT(files, ElementsAre(logger->event_file_path()));
  absl::StatusOr<std::vector<testing::Event>> events = testing::ReadEvents(files[0]);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_THAT(*events, SizeIs(4));
  EXPECT_EQ((*events)[0].file_version(), "brain.Event:2");
  EXPECT_EQ((*events)[1].session_log().status(), testing::SessionLog::START);
  EXPECT_EQ((*events)[1].step(), 0);

  const testing::Event& first = (*events)[2];
  EXPECT_EQ(first.step(), 1);
  EXPECT_DOUBLE_EQ(first.wall_time(), 1796200001.0);
  ASSERT_EQ(first.summary().value_size(), 3);
  EXPECT_EQ(first.summary().value(0).tag(), "reward/mean");
  EXPECT_EQ(first.summary().value(0).simple_value(), 0.41f);
  EXPECT_EQ(first.summary().value(1).tag(), "train/kl");
  EXPECT_EQ(first.summary().value(1).simple_value(), 0.002f);
  EXPECT_EQ(first.summary().value(2).tag(), "rollout/staleness");
  EXPECT_THAT(first.summary().value(2).histo().bucket_limit(), ElementsAre(0.5, 1.5));
  EXPECT_THAT(first.summary().value(2).histo().bucket(), ElementsAre(1, 2));
  EXPECT_EQ((*events)[3].step(), 2);
  EXPECT_EQ((*events)[3].summary().value(0).simple_value(), 0.5f);
}

TEST(MetricsLogger, ResumingStartsANewEventFileThatHidesTheRepeatedSteps) {
  const std::string dir = FreshDir("tensorboard_resume");
  {
    auto logger = OpenOrDie(dir);
    ASSERT_NE(logger, nullptr);
    for (int step = 1; step <= 5; ++step) ASSERT_TRUE(logger->Log(step, {{"x", 1}}, {}, kT0).ok());
  }
  MetricsLoggerOptions options;
  options.resume_step = 3;
  auto logger = OpenOrDie(dir, options);
  ASSERT_NE(logger, nullptr);
  const std::vector<std::string> files = testing::ListEventFiles(dir + "/tb");
  ASSERT_THAT(files, SizeIs(2));
  EXPECT_EQ(files[1], logger->event_file_path());  // Sorts after the first run's file.
  absl::StatusOr<std::vector<testing::Event>> events = testing::ReadEvents(files[1]);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_THAT(*events, SizeIs(2));
  EXPECT_EQ((*events)[1].session_log().status(), testing::SessionLog::START);
  EXPECT_EQ((*events)[1].step(), 4);  // TensorBoard drops the old file's steps >= 4.
}

TEST(MetricsLogger, PutsEventFilesUnderTheRunName) {
  const std::string dir = FreshDir("run_name");
  MetricsLoggerOptions options;
  options.run_name = "grpo-seed0";
  auto logger = OpenOrDie(dir, options);
  ASSERT_NE(logger, nullptr);
  EXPECT_THAT(testing::ListEventFiles(dir + "/tb/grpo-seed0"),
              ElementsAre(logger->event_file_path()));
}

TEST(MetricsLogger, WritesNoEventFilesWithoutTensorBoard) {
  const std::string dir = FreshDir("no_tensorboard");
  MetricsLoggerOptions options;
  options.tensorboard = false;
  auto logger = OpenOrDie(dir, options);
  ASSERT_NE(logger, nullptr);
  ASSERT_TRUE(logger->Log(1, {{"x", 1}}, {}, kT0).ok());
  EXPECT_THAT(logger->event_file_path(), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/tb"));
}

TEST(MetricsLogger, KeepsLinesWholeWhenLoggedFromManyThreads) {
  const std::string dir = FreshDir("threads");
  auto logger = OpenOrDie(dir);
  ASSERT_NE(logger, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&logger, t] {
      for (int i = 0; i < 50; ++i) {
        EXPECT_TRUE(logger->Log(0, {{"thread/" + std::to_string(t), i}}).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(Steps(logger->jsonl_path()), SizeIs(200));
  absl::StatusOr<std::vector<testing::Event>> events =
      testing::ReadEvents(logger->event_file_path());
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(*events, SizeIs(202));
}

}  // namespace
}  // namespace troupe::metrics
