#include "base/atomic_file.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

TEST(AtomicFile, CreatesAndThenReplacesTheTarget) {
  test::TempDir tmp("replace");
  const std::string dir = tmp.path();
  std::string path = dir + "/f.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  EXPECT_EQ(test::ReadFile(path), "first");
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(test::ReadFile(path), "second, longer");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"f.txt"});
}

TEST(AtomicFile, LeavesTheTargetUntouchedWhenTheProducerFails) {
  test::TempDir tmp("producer_fails");
  const std::string dir = tmp.path();
  std::string path = dir + "/f.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  absl::Status s = WriteFileAtomically(path, [](AtomicFileSink& out) {
    absl::Status a = out.Append("partial new conte");
    if (!a.ok()) return a;
    return absl::DataLossError("producer gave up");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(test::ReadFile(path), "old");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"f.txt"});
}

TEST(AtomicFile, LeavesTheTargetUntouchedWhenAWriteFailsMidway) {
  test::TempDir tmp("write_fails");
  const std::string dir = tmp.path();
  std::string path = dir + "/f.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  // A file-size limit makes write() fail with EFBIG after 4 KiB (works even as root).
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &previous), 0);
  rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status s = WriteFileAtomically(path, std::string(64 * 1024, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &previous, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("write"));
  EXPECT_EQ(test::ReadFile(path), "old");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"f.bin"});
}

TEST(AtomicFile, GivesTheFileItsModeBeforeAnyByteIsWritten) {
  test::TempDir tmp("mode");
  const std::string dir = tmp.path();
  std::string secret = dir + "/secret";
  // While the producer runs, the temporary file (the only other entry) already has mode 0600.
  std::vector<mode_t> temp_modes;
  ASSERT_TRUE(WriteFileAtomically(
                  secret,
                  [&](AtomicFileSink& out) {
                    for (const std::string& name : ListDir(dir)) {
                      struct stat st;
                      if (::stat((dir + "/" + name).c_str(), &st) == 0) {
                        temp_modes.push_back(st.st_mode & 07777);
                      }
                    }
                    return out.Append("token");
                  },
                  0600)
                  .ok());
  EXPECT_EQ(temp_modes, std::vector<mode_t>{0600});
  struct stat st;
  ASSERT_EQ(::stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // Replacing keeps the requested mode; the default stays 0644 whatever the umask.
  const mode_t old_umask = ::umask(0077);
  ASSERT_TRUE(WriteFileAtomically(secret, "token2", 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/public", "data").ok());
  ::umask(old_umask);
  ASSERT_EQ(::stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir + "/public").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST(AtomicFile, ReportsAMissingDirectoryByPath) {
  test::TempDir tmp("x");
  absl::Status s = WriteFileAtomically(tmp.Path("no/such/dir/f"), "data");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir/f"));
}

}  // namespace
}  // namespace troupe
