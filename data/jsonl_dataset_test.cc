#include "data/jsonl_dataset.h"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& leaf) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + leaf;
}

std::string WriteFile(const std::string& leaf, const std::string& text) {
  const std::string path = TempPath(leaf);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const char kTwoRecords[] =
    R"({"data_source": "arithmetic", "prompt": "1+1=", "reward_model": {"ground_truth": "2"}})"
    "\n\n   \n"
    R"({"data_source": "countdown", "prompt": [{"role": "user", "content": "hi"}], )"
    R"("reward_model": {"ground_truth": {"target": 3, "numbers": [1, 2]}}, "extra_info": {"i": 1}})"
    "\n";

TEST(JsonlDataset, IndexesNonBlankLinesAndReadsVerlRecords) {
  const std::string path = WriteFile("two.jsonl", kTwoRecords);
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 2);
  EXPECT_EQ((*ds)->Where(1), path + ":4");
  auto first = (*ds)->Read(0, RecordKeys{});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->data_source, "arithmetic");
  EXPECT_EQ(first->prompt, "1+1=");
  EXPECT_EQ(first->ground_truth, "2");
  EXPECT_EQ(first->extra_info_json, "");
  auto second = (*ds)->Read(1, RecordKeys{});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->prompt.is_array());
  EXPECT_EQ(nlohmann::json::parse(second->ground_truth),
            nlohmann::json::parse(R"({"target": 3, "numbers": [1, 2]})"));
  EXPECT_EQ(nlohmann::json::parse(second->extra_info_json), nlohmann::json({{"i", 1}}));
  EXPECT_EQ((*ds)->identity().size(), 1u);
  EXPECT_EQ((*ds)->identity()[0].size, static_cast<int64_t>(sizeof(kTwoRecords) - 1));
}

TEST(JsonlDataset, NumbersRecordsAcrossFilesInOrder) {
  const std::string a = WriteFile("a.jsonl", "{\"prompt\": \"a\", \"answer\": \"1\"}\n");
  const std::string b = WriteFile("b.jsonl", "\n{\"prompt\": \"b\", \"answer\": \"2\"}");
  auto ds = JsonlDataset::Open({a, b}, {});
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->size(), 2);
  RecordKeys keys{.answer_key = "answer", .default_data_source = "mine"};
  auto r = (*ds)->Read(1, keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt, "b");
  EXPECT_EQ(r->data_source, "mine");
  EXPECT_EQ(r->where, b + ":2");
}

TEST(JsonlDataset, MapsOpenRlhfKeysByDottedPath) {
  const std::string path = WriteFile(
      "rlhf.jsonl", R"({"input": "q", "meta": {"label": 7}, "src": "math", "info": {"a": 1}})");
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok());
  RecordKeys keys{.prompt_key = "input",
                  .answer_key = "meta.label",
                  .data_source_key = "src",
                  .extra_info_key = "info"};
  auto r = (*ds)->Read(0, keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt, "q");
  EXPECT_EQ(r->ground_truth, "7");
  EXPECT_EQ(r->data_source, "math");
}

TEST(JsonlDataset, NamesFileAndLineOfAMalformedLineOrAMissingKey) {
  const std::string path = WriteFile(
      "bad.jsonl",
      "{\"prompt\": \"a\", \"reward_model\": {\"ground_truth\": \"1\"}, \"data_source\": \"x\"}\n"
      "\n"
      "{\"prompt\": oops}\n"
      "{\"question\": \"a\", \"reward_model\": {\"ground_truth\": \"1\"}, \"data_source\": "
      "\"x\"}\n");
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE((*ds)->Read(0, {}).ok());
  auto bad = (*ds)->Read(1, {});
  EXPECT_THAT(bad.status().message(), HasSubstr(path + ":3: not valid JSON ("));
  auto missing = (*ds)->Read(2, {});
  EXPECT_EQ(missing.status().message(), path + ":4: no key 'prompt'");
  absl::Status all = (*ds)->Validate({});
  EXPECT_THAT(all.message(), HasSubstr(path + ":3: not valid JSON"));
  EXPECT_THAT(all.message(), HasSubstr(path + ":4: no key 'prompt'"));
}

TEST(JsonlDataset, RefusesARecordWithoutDataSourceUnlessADefaultIsSet) {
  const std::string path =
      WriteFile("nosource.jsonl", R"({"prompt": "a", "reward_model": {"ground_truth": "1"}})");
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok());
  EXPECT_THAT((*ds)->Read(0, {}).status().message(), HasSubstr(path + ":1: no key 'data_source'"));
  EXPECT_EQ((*ds)->Read(0, {.default_data_source = "d"})->data_source, "d");
}

TEST(JsonlDataset, RefusesAnOverlongLineNamingIt) {
  const std::string path = WriteFile(
      "long.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \"" + std::string(3000, 'x') + "\"}\n");
  auto ds = JsonlDataset::Open({path}, {.max_line_bytes = 1024});
  EXPECT_EQ(ds.status().message(), path + ":2: line longer than 1024 bytes");
}

TEST(JsonlDataset, FindsLineNumbersPastManyBlocks) {
  std::string text;
  for (int i = 0; i < 10000; ++i) {
    if (i % 3 == 0) text += "\n";
    text += "{\"prompt\": \"p\", \"reward_model\": {\"ground_truth\": \"" + std::to_string(i) +
            "\"}, \"data_source\": \"s\"}\n";
  }
  const std::string path = WriteFile("many.jsonl", text);
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok());
  ASSERT_EQ((*ds)->size(), 10000);
  // Record i is on line i + 1 + (number of blank lines before it) = i + 1 + i / 3 + 1.
  EXPECT_EQ((*ds)->Where(9999), path + ":" + std::to_string(9999 + 1 + 9999 / 3 + 1));
  EXPECT_EQ((*ds)->Read(8200, {})->ground_truth, "8200");
  EXPECT_TRUE((*ds)->Validate({}).ok());
}

TEST(JsonlDataset, DecompressesGzipOnceIntoTheCache) {
  const std::string path = TempPath("data.jsonl.gz");
  gzFile gz = gzopen(path.c_str(), "wb");
  const std::string text = std::string(kTwoRecords) + "{bad\n";
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  const std::string cache = TempPath("cache");
  auto ds = JsonlDataset::Open({path}, {.cache_dir = cache});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->size(), 3);
  EXPECT_EQ((*ds)->Read(0, {})->ground_truth, "2");
  EXPECT_THAT((*ds)->Read(2, {}).status().message(), HasSubstr(path + ":5: not valid JSON"));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  auto again = JsonlDataset::Open({path}, {.cache_dir = cache});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->size(), 3);
  EXPECT_FALSE(JsonlDataset::Open({path}, {}).ok());  // no cache dir
}

TEST(JsonlDataset, RefusesAMissingFileByName) {
  auto ds = JsonlDataset::Open({TempPath("nope.jsonl")}, {});
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr("nope.jsonl"));
}

TEST(ShuffledOrder, EachEpochIsAPermutationThatDependsOnSeedAndEpoch) {
  const int64_t n = 1000;
  ShuffledOrder order(n, 7, true);
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t i = 0; i < n; ++i) epoch0.push_back(order.RecordAt(i));
  for (int64_t i = n; i < 2 * n; ++i) epoch1.push_back(order.RecordAt(i));
  EXPECT_EQ(std::set<int64_t>(epoch0.begin(), epoch0.end()).size(), static_cast<size_t>(n));
  EXPECT_EQ(std::set<int64_t>(epoch1.begin(), epoch1.end()).size(), static_cast<size_t>(n));
  EXPECT_EQ(*std::max_element(epoch0.begin(), epoch0.end()), n - 1);
  EXPECT_NE(epoch0, epoch1);
  ShuffledOrder same(n, 7, true), other(n, 8, true);
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(same.RecordAt(i), epoch0[i]);
    differ += other.RecordAt(i) != epoch0[i];
  }
  EXPECT_GT(differ, n / 2);
  ShuffledOrder plain(n, 7, false);
  EXPECT_EQ(plain.RecordAt(1234), 234);
}

}  // namespace
}  // namespace troupe::data
