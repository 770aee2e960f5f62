// The registry of local heads: a head registered with its state directory is found by its
// address (any spelling of this machine, with or without a scheme), stale entries are skipped and
// pruned, and other endpoints are not matched.
#include "runtime/cluster/local_heads.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

class LocalHeadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path();
    std::filesystem::create_directories(root_ + "/run");
    ::chmod((root_ + "/run").c_str(), 0700);
    // The registry goes under this test's own runtime directory.
    ::setenv("XDG_RUNTIME_DIR", (root_ + "/run").c_str(), 1);
  }

  std::string StateDir(const std::string& name, const std::string& head_address) {
    const std::string dir = root_ + "/" + name;
    test::WriteFile(dir + "/head.address", head_address + "\n");
    return dir;
  }

  test::TempDir tmp_{"local_heads"};
  std::string root_;
};

TEST_F(LocalHeadsTest, ARegisteredHeadIsFoundByItsAddressSpelledAnyLocalWay) {
  EXPECT_EQ(LocalHeadsDirectory(), root_ + "/run/troupe-heads");
  const std::string a = StateDir("a", "127.0.0.1:41001");
  const std::string b = StateDir("b", "127.0.0.1:41002");
  test::WriteFile(b + "/dashboard.address", "http://127.0.0.1:48265\n");
  ASSERT_TRUE(RegisterLocalHead(a).ok());
  ASSERT_TRUE(RegisterLocalHead(b).ok());
  // The registry is private.
  struct stat st;
  ASSERT_EQ(::stat(LocalHeadsDirectory().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);

  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41001"), a);
  EXPECT_EQ(FindLocalHeadStateDir("localhost:41001"), a);
  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41002"), b);
  EXPECT_EQ(FindLocalHeadStateDir("http://localhost:48265/"), b);
  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41003"), std::nullopt);
  EXPECT_EQ(FindLocalHeadStateDir("10.255.255.1:41001"), std::nullopt);  // not this machine
  EXPECT_EQ(FindLocalHeadStateDir("garbage"), std::nullopt);
}

TEST_F(LocalHeadsTest, StoppedAndDeletedHeadsAreNotFound) {
  const std::string a = StateDir("a", "127.0.0.1:41001");
  const std::string b = StateDir("b", "127.0.0.1:41002");
  ASSERT_TRUE(RegisterLocalHead(a).ok());
  ASSERT_TRUE(RegisterLocalHead(b).ok());
  UnregisterLocalHead(a);
  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41001"), std::nullopt);
  // A state directory now serving another address does not answer for the old one.
  test::WriteFile(b + "/head.address", "127.0.0.1:41009\n");
  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41002"), std::nullopt);
  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41009"), b);
  // A deleted state directory's entry is pruned.
  std::filesystem::remove_all(b);
  EXPECT_EQ(FindLocalHeadStateDir("127.0.0.1:41009"), std::nullopt);
  EXPECT_TRUE(std::filesystem::is_empty(LocalHeadsDirectory()));
}

TEST_F(LocalHeadsTest, EndpointsAreComparedByPortAndMachine) {
  EXPECT_TRUE(SameLocalEndpoint("127.0.0.1:1", "localhost:1"));
  EXPECT_TRUE(SameLocalEndpoint("http://127.0.0.1:1/", "0.0.0.0:1"));
  EXPECT_TRUE(SameLocalEndpoint("[::1]:7", "127.0.0.1:7"));
  EXPECT_TRUE(SameLocalEndpoint("example.org:5", "EXAMPLE.org:5"));
  EXPECT_FALSE(SameLocalEndpoint("127.0.0.1:1", "127.0.0.1:2"));
  EXPECT_FALSE(SameLocalEndpoint("example.org:5", "127.0.0.1:5"));
  EXPECT_FALSE(SameLocalEndpoint("127.0.0.1", "127.0.0.1"));  // no port
}

}  // namespace
}  // namespace troupe
