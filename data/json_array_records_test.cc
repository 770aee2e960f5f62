// The "json" record format (json_array_records.cc), through OpenRecords.
#include <string>

#include "base/testing/temp_dir.h"
#include "data/record_source.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;

TEST(JsonArrayRecords, ReadsAJsonArrayFileNamingTheLineEachElementStartsOn) {
  test::TempDir dir("records");
  const std::string path = dir.Path("t.json");
  test::WriteFile(path, "[\n  {\"p\": \"x,[y\"},\n  {\"p\": {\"q\": [1, 2]}}, 7\n]\n");
  EXPECT_EQ(RecordFormatOf(path), "json");
  absl::StatusOr<std::unique_ptr<RecordSource>> src = OpenRecords({path}, {});
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->size(), 3);
  absl::StatusOr<JsonRecord> r = (*src)->Read(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->where, path + ":3");
  EXPECT_EQ(*LookupDotted(r->value, "p.q"), nlohmann::json({1, 2}));
  EXPECT_EQ((*src)->Read(0)->where, path + ":2");
  EXPECT_EQ((*src)->Read(2).status().message(), path + ":3: expected a JSON object, got number");
}

TEST(JsonArrayRecords, RefusesAJsonFileThatIsNotOneArray) {
  test::TempDir dir("records");
  test::WriteFile(dir.Path("obj.json"), "{\"p\": 1}");
  test::WriteFile(dir.Path("bad.json"), "[{\"p\": 1},");
  EXPECT_EQ(OpenRecords({dir.Path("obj.json")}, {}).status().message(),
            dir.Path("obj.json") + ": a .json dataset is one JSON array of records, got object");
  EXPECT_THAT(OpenRecords({dir.Path("bad.json")}, {}).status().message(),
              HasSubstr(dir.Path("bad.json") + ": not valid JSON ("));
  EXPECT_EQ(OpenRecords({dir.Path("none.json")}, {}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace troupe::data
