#include "data/jsonl_dataset.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;

// One directory for the whole test binary (removed when it exits).
std::string TempPath(const std::string& leaf) {
  static const test::TempDir dir("jsonl_dataset_test");
  return dir.Path(leaf);
}

std::string TempFile(const std::string& leaf, const std::string& text) {
  const std::string path = TempPath(leaf);
  test::WriteFile(path, text);
  return path;
}

const char kTwoRecords[] =
    R"({"data_source": "arithmetic", "prompt": "1+1=", "reward_model": {"ground_truth": "2"}})"
    "\n\n   \n"
    R"({"data_source": "countdown", "prompt": [{"role": "user", "content": "hi"}], )"
    R"("reward_model": {"ground_truth": {"target": 3, "numbers": [1, 2]}}, "extra_info": {"i": 1}})"
    "\n";

TEST(JsonlDataset, IndexesNonBlankLinesAndReadsVerlRecords) {
  const std::string path = TempFile("two.jsonl", kTwoRecords);
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
  const std::string a = TempFile("a.jsonl", "{\"prompt\": \"a\", \"answer\": \"1\"}\n");
  const std::string b = TempFile("b.jsonl", "\n{\"prompt\": \"b\", \"answer\": \"2\"}");
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
  const std::string path = TempFile(
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
  const std::string path = TempFile(
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

// A record nested 100,000 deep parses, then overflows the stack of the first copy or dump (the
// driver crashed on it): refused with its file and line, the records around it read as usual.
TEST(JsonlDataset, RefusesARecordNestedTooDeepWithItsFileAndLine) {
  const std::string good =
      "{\"prompt\": \"a\", \"reward_model\": {\"ground_truth\": \"1\"}, \"data_source\": \"x\"}\n";
  const std::string deep =
      "{\"prompt\": \"a\", \"reward_model\": {\"ground_truth\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}, \"data_source\": \"x\"}\n";
  const std::string path = TempFile("deep.jsonl", good + deep + good);
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE((*ds)->Read(0, {}).ok());
  EXPECT_EQ((*ds)->Read(1, {}).status().message(), path + ":2: JSON nested deeper than 64 levels");
  EXPECT_TRUE((*ds)->Read(2, {}).ok());
  EXPECT_THAT((*ds)->Validate({}).message(), HasSubstr(path + ":2: JSON nested deeper than 64"));
}

TEST(JsonlDataset, RefusesARecordWithoutDataSourceUnlessADefaultIsSet) {
  const std::string path =
      TempFile("nosource.jsonl", R"({"prompt": "a", "reward_model": {"ground_truth": "1"}})");
  auto ds = JsonlDataset::Open({path}, {});
  ASSERT_TRUE(ds.ok());
  EXPECT_THAT((*ds)->Read(0, {}).status().message(), HasSubstr(path + ":1: no key 'data_source'"));
  EXPECT_EQ((*ds)->Read(0, {.default_data_source = "d"})->data_source, "d");
}

TEST(JsonlDataset, RefusesAnOverlongLineNamingIt) {
  const std::string path = TempFile(
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
  const std::string path = TempFile("many.jsonl", text);
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

std::string WriteGzip(const std::string& leaf, const std::string& text) {
  const std::string path = TempPath(leaf);
  gzFile gz = gzopen(path.c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  return path;
}

// The issue-30 probe: a 4.5 MB gzip bomb was inflated in full (1 GiB) before being refused. Here
// 256 MiB of tiny records (ratio ~1000): refused once 16 MiB are out, naming the file, and
// nothing is left in the cache.
TEST(JsonlDataset, AGzipBombIsRefusedAfterAFewMibNotInflatedInFull) {
  const std::string path = TempPath("bomb.jsonl.gz");
  {
    gzFile gz = gzopen(path.c_str(), "wb1");
    const std::string chunk = [] {
      std::string c;
      while (c.size() < (1 << 20)) c += "{}\n";
      return c;
    }();
    for (int i = 0; i < 256; ++i) gzwrite(gz, chunk.data(), static_cast<unsigned>(chunk.size()));
    gzclose(gz);
  }
  ASSERT_LT(std::filesystem::file_size(path), 2u << 20);
  const std::string cache = TempPath("bomb_cache");
  auto ds = JsonlDataset::Open({path}, {.cache_dir = cache});
  ASSERT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument) << ds.status();
  EXPECT_THAT(ds.status().message(), HasSubstr(path + ": decompresses to more than 100 times"));
  // Stopped within a chunk of the 16 MiB where the ratio is first checked.
  const std::string message(ds.status().message());
  const size_t at = message.find("times its compressed size (");
  ASSERT_NE(at, std::string::npos) << message;
  const int64_t inflated = std::stoll(message.substr(at + 27));
  EXPECT_LE(inflated, int64_t{18} << 20) << message;
  int files = 0;
  for (auto it = std::filesystem::directory_iterator(cache); it != decltype(it)(); ++it) ++files;
  EXPECT_EQ(files, 0);
  // A line longer than the limit stops it at once too, and the size bound holds on its own.
  const std::string zeros = WriteGzip("zeros.jsonl.gz", std::string(3 << 20, '0'));
  auto line = JsonlDataset::Open({zeros}, {.cache_dir = cache, .max_line_bytes = 1 << 20});
  EXPECT_THAT(line.status().message(), HasSubstr(zeros + ":1: line longer than 1 MiB"));
  const std::string fine = WriteGzip("fine.jsonl.gz", std::string(kTwoRecords) + kTwoRecords);
  auto big = JsonlDataset::Open({fine}, {.cache_dir = cache, .max_gzip_bytes = 100});
  EXPECT_THAT(big.status().message(), HasSubstr(fine + ": decompresses to more than 100 bytes"));
  EXPECT_TRUE(JsonlDataset::Open({fine}, {.cache_dir = cache}).ok());
}

// The other probe: the cache was a shared /tmp directory, so another user who owned it could
// plant the dataset (or a symlink where it is written). A cache directory that is not private
// is refused; a planted cache file that is a symlink or writable by others is not trusted: the
// .gz is decompressed again and the plant replaced (never written through).
TEST(JsonlDataset, TheGzipCacheMustBePrivateAndPlantedFilesAreNotTrusted) {
  namespace fs = std::filesystem;
  const std::string path = WriteGzip("plain.jsonl.gz", kTwoRecords);
  const std::string shared = TempPath("shared_cache");
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);  // 0777, like /tmp without its sticky bit
  auto refused = JsonlDataset::Open({path}, {.cache_dir = shared});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr(shared + " is writable by others"));
  const std::string link = TempPath("linked_cache");
  fs::remove_all(link);
  fs::create_directory_symlink(TempPath("private_cache"), link);
  fs::create_directories(TempPath("private_cache"));
  EXPECT_THAT(JsonlDataset::Open({path}, {.cache_dir = link}).status().message(),
              HasSubstr("is a symlink"));
  // A new cache directory is made 0700.
  const std::string cache = TempPath("made_cache/sub");
  fs::remove_all(TempPath("made_cache"));
  auto made = JsonlDataset::Open({path}, {.cache_dir = cache});
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(fs::status(cache).permissions() & fs::perms::all, fs::perms::owner_all);
  // Plant: a symlink to a victim file, and a world-writable poisoned file, under the names the
  // cache uses (found from the first, honest, decompression).
  std::string cached;
  for (const auto& e : fs::directory_iterator(cache)) cached = e.path().string();
  ASSERT_FALSE(cached.empty());
  const std::string victim = TempFile("victim.txt", "precious\n");
  fs::remove(cached);
  fs::create_symlink(victim, cached);
  auto through_link = JsonlDataset::Open({path}, {.cache_dir = cache});
  ASSERT_TRUE(through_link.ok()) << through_link.status();
  EXPECT_EQ((*through_link)->size(), 2);
  EXPECT_EQ((*through_link)->Read(0, {})->ground_truth, "2");
  EXPECT_EQ(test::ReadFile(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(cached));
  fs::remove(cached);
  std::ofstream(cached)
      << R"({"data_source": "x", "prompt": "p", "reward_model": {"ground_truth": "poison"}})"
      << "\n";
  fs::permissions(cached, fs::perms::all);
  auto poisoned = JsonlDataset::Open({path}, {.cache_dir = cache});
  ASSERT_TRUE(poisoned.ok()) << poisoned.status();
  EXPECT_EQ((*poisoned)->size(), 2);
  EXPECT_EQ((*poisoned)->Read(0, {})->ground_truth, "2");
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
