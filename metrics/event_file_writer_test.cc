#include "metrics/event_file_writer.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/tfevents_test_reader.h"

namespace troupe::metrics {
namespace {

using ::testing::ElementsAre;
using testing::Event;
using ::testing::HasSubstr;
using testing::ListEventFiles;
using ::testing::MatchesRegex;
using testing::ReadEvents;
using testing::ReadTfRecords;
using testing::SessionLog;
using testing::Summary;

// A directory in this binary's temporary directory (removed when it exits); not created yet.
std::string FreshDir(const std::string& name) {
  static test::TempDir root("event_file_writer");
  const std::string dir = root.Path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

std::string Host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

const absl::Time kT0 = absl::FromUnixSeconds(1796200000);

TEST(EventFileWriter, NamesTheFileAfterTheTimeAndHostAndStartsWithTheFileVersion) {
  const std::string dir = FreshDir("name");
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Create(dir + "/nested/tb", kT0 + absl::Milliseconds(250));
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->path(), dir + "/nested/tb/events.out.tfevents.1796200000." + Host());

  absl::StatusOr<std::vector<Event>> events = ReadEvents((*writer)->path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].file_version(), "brain.Event:2");
  EXPECT_DOUBLE_EQ((*events)[0].wall_time(), 1796200000.25);
}

TEST(EventFileWriter, NeverReusesAnExistingFile) {
  const std::string dir = FreshDir("unique");
  auto first = EventFileWriter::Create(dir, kT0);
  auto second = EventFileWriter::Create(dir, kT0);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)->path(), (*second)->path());
  EXPECT_EQ((*second)->path(), (*first)->path() + ".1");
  EXPECT_EQ(ListEventFiles(dir).size(), 2u);
}

TEST(EventFileWriter, WritesScalarsThatParseBackWithTheirStepAndTime) {
  const std::string dir = FreshDir("scalars");
  auto writer = EventFileWriter::Create(dir, kT0);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)
                  ->WriteSummary(37, kT0 + absl::Seconds(5),
                                 {{"reward/mean", 0.41}, {"kl", 0.0}, {"loss", -2.5}}, {})
                  .ok());

  auto events = ReadEvents((*writer)->path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  const Event& e = (*events)[1];
  EXPECT_EQ(e.step(), 37);
  EXPECT_DOUBLE_EQ(e.wall_time(), 1796200005.0);
  ASSERT_TRUE(e.has_summary());
  ASSERT_EQ(e.summary().value_size(), 3);
  // Tag order; a zero value is still present (a oneof member is always written).
  EXPECT_EQ(e.summary().value(0).tag(), "kl");
  EXPECT_EQ(e.summary().value(0).value_case(), Summary::Value::kSimpleValue);
  EXPECT_EQ(e.summary().value(0).simple_value(), 0.0f);
  EXPECT_EQ(e.summary().value(1).tag(), "loss");
  EXPECT_EQ(e.summary().value(1).simple_value(), -2.5f);
  EXPECT_EQ(e.summary().value(2).tag(), "reward/mean");
  EXPECT_EQ(e.summary().value(2).simple_value(), 0.41f);
}

TEST(EventFileWriter, WritesHistogramsWithTheirBuckets) {
  const std::string dir = FreshDir("histograms");
  auto writer = EventFileWriter::Create(dir, kT0);
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::StatusOr<Histogram> staleness = MakeHistogram({0, 0, 1, 2, 2, 2}, 30);
  ASSERT_TRUE(staleness.ok());
  ASSERT_TRUE((*writer)
                  ->WriteSummary(3, kT0, {{"reward", 1}},
                                 {{"staleness", *staleness}, {"empty", Histogram{}}})
                  .ok());

  auto events = ReadEvents((*writer)->path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  const Summary& summary = (*events)[1].summary();
  ASSERT_EQ(summary.value_size(), 2);  // The empty histogram is skipped.
  EXPECT_EQ(summary.value(1).tag(), "staleness");
  ASSERT_EQ(summary.value(1).value_case(), Summary::Value::kHisto);
  const testing::HistogramProto& h = summary.value(1).histo();
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 2);
  EXPECT_EQ(h.num(), 6);
  EXPECT_EQ(h.sum(), 7);
  EXPECT_EQ(h.sum_squares(), 13);
  EXPECT_THAT(h.bucket_limit(), ElementsAre(0.5, 1.5, 2.5));
  EXPECT_THAT(h.bucket(), ElementsAre(2, 1, 3));
}

TEST(EventFileWriter, WritesASessionStartAtTheGivenStep) {
  const std::string dir = FreshDir("session");
  auto writer = EventFileWriter::Create(dir, kT0);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteSessionStart(101, kT0).ok());
  auto events = ReadEvents((*writer)->path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].step(), 101);
  ASSERT_TRUE((*events)[1].has_session_log());
  EXPECT_EQ((*events)[1].session_log().status(), SessionLog::START);
}

TEST(EventFileWriter, EncodesEveryRecordExactlyAsProtobufWould) {
  const std::string dir = FreshDir("canonical");
  auto writer = EventFileWriter::Create(dir, kT0 + absl::Microseconds(123456));
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::StatusOr<Histogram> h = MakeHistogram({-1.5, 0.25, 3.0, 3.0, 7.75}, 5);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*writer)->WriteSessionStart(0, kT0).ok());
  ASSERT_TRUE((*writer)->WriteSummary(0, kT0, {{"zero_step", 1.0}}, {}).ok());
  ASSERT_TRUE((*writer)
                  ->WriteSummary(1ll << 40, kT0 + absl::Seconds(1),
                                 {{"a", -0.0}, {"b", 1e30}, {"c", 3.14159}}, {{"h", *h}})
                  .ok());

  auto records = ReadTfRecords((*writer)->path());
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 4u);
  for (const std::string& record : *records) {
    Event event;
    ASSERT_TRUE(event.ParseFromString(record));
    std::string reserialized;
    ASSERT_TRUE(event.SerializeToString(&reserialized));
    // Same bytes: packed repeated fields, field order and omitted defaults all match.
    EXPECT_EQ(reserialized, record) << event.ShortDebugString();
  }
}

TEST(EventFileWriter, TheReaderRejectsACorruptedRecord) {
  const std::string dir = FreshDir("corrupt");
  auto writer = EventFileWriter::Create(dir, kT0);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteSummary(1, kT0, {{"x", 1.0}}, {}).ok());
  const std::string path = (*writer)->path();
  writer->reset();

  const std::string bytes = test::ReadFile(path);
  ASSERT_TRUE(ReadTfRecords(path).ok());
  std::string flipped = bytes;
  flipped[flipped.size() - 6] ^= 0x01;  // A byte of the last record's data.
  test::WriteFile(path, flipped);
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(path);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(records.status().message(), HasSubstr("record 1"));

  test::WriteFile(path, bytes.substr(0, bytes.size() - 3));
  EXPECT_THAT(ReadTfRecords(path).status().message(), HasSubstr("truncated"));
}

TEST(EventFileWriter, RejectsNegativeStepsAndEmptyTags) {
  const std::string dir = FreshDir("invalid");
  auto writer = EventFileWriter::Create(dir, kT0);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->WriteSummary(-1, kT0, {{"x", 1}}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*writer)->WriteSummary(1, kT0, {{"", 1}}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*writer)->WriteSessionStart(-3, kT0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(EventFileWriter, ReportsADirectoryItCannotCreate) {
  const std::string dir = FreshDir("blocked");
  std::filesystem::create_directories(dir);
  test::WriteFile(dir + "/file", "x");
  auto writer = EventFileWriter::Create(dir + "/file/tb", kT0);
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr(dir + "/file/tb"));
}

}  // namespace
}  // namespace troupe::metrics
