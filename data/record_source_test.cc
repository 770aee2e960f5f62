#include "data/record_source.h"

#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;

TEST(OpenRecords, ReadsJsonlRecordsWithTheirFileAndLine) {
  test::TempDir dir("records");
  const std::string path = dir.Path("t.jsonl");
  test::WriteFile(path, "{\"a\": {\"b\": 1}}\n\n[1]\n{\"a\": \n");
  absl::StatusOr<std::unique_ptr<RecordSource>> src = OpenRecords({path}, {});
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->size(), 3);
  absl::StatusOr<JsonRecord> r = (*src)->Read(0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->where, path + ":1");
  EXPECT_EQ(*LookupDotted(r->value, "a.b"), 1);
  EXPECT_EQ((*src)->Read(1).status().message(), path + ":3: expected a JSON object, got array");
  EXPECT_THAT((*src)->Read(2).status().message(), HasSubstr(path + ":4: not valid JSON ("));
  EXPECT_EQ((*src)->Read(3).status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_EQ((*src)->Identity().size(), 1u);
  EXPECT_EQ((*src)->Identity()[0]["path"], path);
}

TEST(OpenRecords, ReadsFilesOfSeveralFormatsAsOneSequence) {
  test::TempDir dir("records");
  test::WriteFile(dir.Path("a.jsonl"), "{\"i\": 0}\n{\"i\": 1}\n");
  test::WriteFile(dir.Path("b.json"), "[{\"i\": 2}]");
  test::WriteFile(dir.Path("c.jsonl"), "{\"i\": 3}\n");
  absl::StatusOr<std::unique_ptr<RecordSource>> src =
      OpenRecords({dir.Path("a.jsonl"), dir.Path("b.json"), dir.Path("c.jsonl")}, {});
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*src)->Read(i)->value["i"], i);
  EXPECT_EQ((*src)->Where(3), dir.Path("c.jsonl") + ":1");
  EXPECT_EQ((*src)->Files().size(), 3u);
  EXPECT_EQ(OpenRecords({}, {}).status().message(), "no dataset files given");
}

}  // namespace
}  // namespace troupe::data
