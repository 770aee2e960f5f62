#include "base/dir_archive.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <random>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;

// The archive framing of dir_archive.h around `raw` entries.
std::string CompressForTest(const std::string& raw) {
  uLongf n = compressBound(raw.size());
  std::string z(n, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(raw.data()),
            raw.size(), 6);
  z.resize(n);
  std::string out = "TRPWD1\n";
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((raw.size() >> (8 * i)) & 0xff));
  return out + z;
}

class DirArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path();
    fs::create_directories(root_ / "src");
  }
  void Write(const std::string& rel, const std::string& text) {
    test::WriteFile((root_ / "src" / rel).string(), text);
  }
  static std::string Read(const fs::path& p) { return test::ReadFile(p.string()); }
  fs::path src() const { return root_ / "src"; }
  fs::path out() const { return root_ / "out"; }

  // A hand-made archive with the given entries (see the format in dir_archive.h).
  static std::string Craft(const std::vector<std::tuple<char, std::string, std::string>>& es);

  test::TempDir tmp_{"dir_archive"};
  fs::path root_;
};

std::string DirArchiveTest::Craft(
    const std::vector<std::tuple<char, std::string, std::string>>& es) {
  // Unsafe names cannot come out of PackDirectory: write the format directly.
  std::string raw;
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) raw.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  for (const auto& [type, name, data] : es) {
    raw.push_back(type);
    u32(name.size());
    raw += name;
    u32(0644);
    for (int i = 0; i < 8; ++i) raw.push_back(static_cast<char>((data.size() >> (8 * i)) & 0xff));
    raw += data;
  }
  return CompressForTest(raw);
}

TEST_F(DirArchiveTest, RoundTripsFilesDirectoriesModesAndInnerSymlinks) {
  Write("job.yaml", "name: x\n");
  Write("data/train.jsonl", std::string(100000, 'a'));
  fs::create_directories(src() / "empty");
  ::chmod((src() / "job.yaml").c_str(), 0640);
  fs::create_symlink("data/train.jsonl", src() / "train.jsonl");
  absl::StatusOr<PackResult> packed = PackDirectory(src().string());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->files, 2);
  EXPECT_EQ(packed->uncompressed_bytes, 100000 + 8);
  EXPECT_LT(packed->archive.size(), 2000u);  // compressed
  ASSERT_TRUE(UnpackDirectory(packed->archive, out().string()).ok());
  EXPECT_EQ(Read(out() / "job.yaml"), "name: x\n");
  EXPECT_EQ(Read(out() / "data/train.jsonl"), std::string(100000, 'a'));
  EXPECT_TRUE(fs::is_directory(out() / "empty"));
  EXPECT_TRUE(fs::is_symlink(out() / "train.jsonl"));
  EXPECT_EQ(Read(out() / "train.jsonl"), std::string(100000, 'a'));
  struct stat sb;
  ASSERT_EQ(::stat((out() / "job.yaml").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0640u);
}

TEST_F(DirArchiveTest, LeavesOutDefaultAndGivenExcludes) {
  Write("keep.txt", "k");
  Write(".git/HEAD", "ref");
  Write("bazel-out/x", "x");
  Write("pkg/__pycache__/m.pyc", "p");
  Write("ckpt/step_1/model.pt", "big");
  Write("logs/a.tmp", "t");
  absl::StatusOr<PackResult> packed =
      PackDirectory(src().string(), {.excludes = {"ckpt", "*.tmp"}});
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(UnpackDirectory(packed->archive, out().string()).ok());
  EXPECT_TRUE(fs::exists(out() / "keep.txt"));
  EXPECT_TRUE(fs::is_directory(out() / "pkg"));
  EXPECT_TRUE(fs::is_directory(out() / "logs"));
  for (const char* gone : {".git", "bazel-out", "pkg/__pycache__", "ckpt", "logs/a.tmp"}) {
    EXPECT_FALSE(fs::exists(out() / gone)) << gone;
  }
  absl::StatusOr<PackResult> all = PackDirectory(src().string(), {.use_default_excludes = false});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->files, 6);
}

TEST_F(DirArchiveTest, RefusesADirectoryOverTheSizeLimitNamingSizeAndLimit) {
  Write("a.bin", std::string(3000, 'x'));
  absl::StatusOr<PackResult> packed =
      PackDirectory(src().string(), {.max_uncompressed_bytes = 2048});
  ASSERT_EQ(packed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(packed.status().message().find("2048 bytes"), std::string::npos) << packed.status();
  EXPECT_NE(packed.status().message().find("a.bin"), std::string::npos);
  std::mt19937 rng(1);
  std::string noise(5000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  Write("a.bin", noise);
  packed = PackDirectory(src().string(), {.max_archive_bytes = 1000});
  ASSERT_EQ(packed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(packed.status().message().find("compressed, over the limit of 1000 bytes"),
            std::string::npos)
      << packed.status();
  // And the unpacker bounds what it inflates.
  packed = PackDirectory(src().string());
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(
      UnpackDirectory(packed->archive, out().string(), {.max_uncompressed_bytes = 100}).code(),
      absl::StatusCode::kResourceExhausted);
}

// The issue-30 probe: an archive of 20,000 entries was unpacked with no count bound. Crafted
// by hand (the packer refuses to make one), it is refused before anything is written; the packer
// refuses a directory with too many entries, naming the limit and --exclude.
TEST_F(DirArchiveTest, RefusesMoreEntriesThanTheLimitBeforeWritingAny) {
  std::vector<std::tuple<char, std::string, std::string>> entries;
  for (int i = 0; i < 20000; ++i) entries.emplace_back('F', "f" + std::to_string(i), "");
  const std::string archive = Craft(entries);
  absl::Status s = UnpackDirectory(archive, out().string());
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("more than 10000 entries"), std::string::npos) << s;
  EXPECT_TRUE(!fs::exists(out()) || fs::is_empty(out()));
  // Within a given bound, the same archive unpacks.
  ASSERT_TRUE(UnpackDirectory(archive, out().string(), {.max_entries = 20000}).ok());
  EXPECT_TRUE(fs::exists(out() / "f19999"));

  for (int i = 0; i < 12; ++i) Write("d/f" + std::to_string(i), "x");
  absl::StatusOr<PackResult> packed = PackDirectory(src().string(), {.max_entries = 10});
  ASSERT_EQ(packed.status().code(), absl::StatusCode::kResourceExhausted) << packed.status();
  EXPECT_NE(packed.status().message().find("more than 10 files"), std::string::npos)
      << packed.status();
  EXPECT_NE(packed.status().message().find("--exclude"), std::string::npos);
  EXPECT_TRUE(PackDirectory(src().string(), {.max_entries = 13}).ok());
}

TEST_F(DirArchiveTest, RefusesASymlinkLeadingOutsideWhenPacking) {
  Write("a.txt", "a");
  fs::create_symlink("../../etc", src() / "escape");
  absl::StatusOr<PackResult> packed = PackDirectory(src().string());
  ASSERT_EQ(packed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(packed.status().message().find("escape"), std::string::npos) << packed.status();
  fs::remove(src() / "escape");
  fs::create_symlink("/etc/passwd", src() / "abs");
  EXPECT_FALSE(PackDirectory(src().string()).ok());
  EXPECT_TRUE(PackDirectory(src().string(), {.excludes = {"abs"}}).ok());
}

TEST_F(DirArchiveTest, SkipsSpecialFiles) {
  Write("a.txt", "a");
  ASSERT_EQ(::mkfifo((src() / "pipe").c_str(), 0600), 0);
  absl::StatusOr<PackResult> packed = PackDirectory(src().string());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->skipped, std::vector<std::string>{"pipe"});
}

TEST_F(DirArchiveTest, RefusesUnsafeNamesBeforeWritingAnything) {
  for (const std::string bad : {"../x", "a/../../x", "/etc/x", "a//b", "./a", "", "a/.."}) {
    const std::string archive = Craft({{'F', "ok.txt", "fine"}, {'F', bad, "evil"}});
    fs::remove_all(out());
    absl::Status s = UnpackDirectory(archive, out().string());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(fs::exists(out() / "ok.txt")) << bad;
  }
  EXPECT_FALSE(fs::exists(root_ / "x"));
}

TEST_F(DirArchiveTest, RefusesSymlinksThatEscapeEvenThroughChains) {
  for (const auto& entries : std::vector<std::vector<std::tuple<char, std::string, std::string>>>{
           {{'L', "l", "../outside"}},
           {{'L', "l", "/etc"}},
           {{'L', "d/l", "../../x"}},
           {{'L', "a", "."}, {'L', "b", "a/.."}},
       }) {
    fs::remove_all(out());
    absl::Status s = UnpackDirectory(Craft(entries), out().string());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << std::get<1>(entries.back());
    EXPECT_FALSE(fs::is_symlink(out() / "b"));
  }
  // A file cannot be written through a symlink: "l" -> "d" then "l/f" would need l as a dir.
  fs::remove_all(out());
  EXPECT_FALSE(
      UnpackDirectory(Craft({{'L', "l", "d"}, {'D', "d", ""}, {'F', "l", "x"}}), out().string())
          .ok());
}

TEST_F(DirArchiveTest, RefusesGarbageAndTruncatedArchives) {
  EXPECT_EQ(UnpackDirectory("nope", out().string()).code(), absl::StatusCode::kInvalidArgument);
  Write("a.txt", "hello");
  absl::StatusOr<PackResult> packed = PackDirectory(src().string());
  ASSERT_TRUE(packed.ok());
  for (size_t cut = 0; cut < packed->archive.size(); ++cut) {
    fs::remove_all(out());
    EXPECT_FALSE(UnpackDirectory(packed->archive.substr(0, cut), out().string()).ok()) << cut;
  }
  // Random byte flips never crash and never write outside.
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string a = packed->archive;
    a[rng() % a.size()] ^= static_cast<char>(1 + rng() % 255);
    fs::remove_all(out());
    (void)UnpackDirectory(a, out().string());
  }
  fs::remove_all(out());
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);  // src
}

TEST_F(DirArchiveTest, RefusesANonEmptyDestinationAndAMissingSource) {
  EXPECT_EQ(PackDirectory((root_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
  Write("a.txt", "a");
  absl::StatusOr<PackResult> packed = PackDirectory(src().string());
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(UnpackDirectory(packed->archive, src().string()).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace troupe
