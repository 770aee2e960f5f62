#include "runtime/actor_library.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/actor.h"
#include "runtime/actor_handle.h"
#include "runtime/actor_registry.h"
#include "runtime/actor_system.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe::testing {

// The role the plugin's PluginEcho serves.
class EchoRole : public Actor {
 public:
  absl::StatusOr<Num> Echo(const Num& n) { return n; }
};
TROUPE_REGISTER_ACTOR(EchoRole, Echo);

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kPlugin[] = "runtime/testing/libtest_actor_plugin.so";

Num MakeNum(int64_t v) {
  Num n;
  n.set_value(v);
  return n;
}

TEST(ActorLibraryTest, LoadsTheTypesALibraryRegistersAndTheyRunHere) {
  absl::StatusOr<std::vector<std::string>> types = LoadActorLibrary(kPlugin);
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_THAT(*types, ElementsAre("PluginEcho", "PluginTextEcho"));
  ASSERT_NE(ActorRegistry::Global().Find("PluginEcho"), nullptr);

  ActorSystem system;
  absl::StatusOr<UntypedActorHandle> h =
      system.SpawnByName("PluginEcho", {.config = {{"offset", 10}}});
  ASSERT_TRUE(h.ok()) << h.status();
  auto r = h->CallByName("Echo", MakeNum(5)).Get(absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(static_cast<const Num&>(**r).value(), 15);  // the library's code ran, with its config
}

TEST(ActorLibraryTest, LoadingTheSameFileAgainGivesTheSameTypesWithoutRunningItTwice) {
  absl::StatusOr<std::vector<std::string>> first = LoadActorLibrary(kPlugin);
  ASSERT_TRUE(first.ok()) << first.status();
  // By another spelling of the same path: registering twice would fail (names taken).
  absl::StatusOr<std::vector<std::string>> again =
      LoadActorLibrary(std::string("./runtime/../runtime/testing/libtest_actor_plugin.so"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*first, *again);
}

TEST(ActorLibraryTest, CheckServesComparesMethodNamesAndMessageTypes) {
  ASSERT_TRUE(LoadActorLibrary(kPlugin).ok());
  const ActorRegistry& registry = ActorRegistry::Global();
  const ActorTypeInfo* role = registry.Find("EchoRole");
  const ActorTypeInfo* echo = registry.Find("PluginEcho");
  const ActorTypeInfo* text = registry.Find("PluginTextEcho");
  ASSERT_NE(role, nullptr);
  ASSERT_NE(echo, nullptr);
  ASSERT_NE(text, nullptr);
  EXPECT_TRUE(CheckServes(*echo, *role).ok());
  absl::Status wrong = CheckServes(*text, *role);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()),
              HasSubstr("PluginTextEcho does not serve the methods of EchoRole: method Echo takes "
                        "troupe.testing.Text and returns troupe.testing.Text, not "
                        "Echo(troupe.testing.Num) -> troupe.testing.Num"));
  // A role with a method the type lacks.
  ActorTypeInfo wider = *role;
  wider.name = "WiderRole";
  wider.methods.push_back(role->methods[0]);
  wider.methods.back().name = "Reset";
  EXPECT_THAT(std::string(CheckServes(*echo, wider).message()),
              HasSubstr("no method Reset(troupe.testing.Num) -> troupe.testing.Num"));
}

TEST(ActorLibraryTest, AnActorInThisProcessIsNotSeenAsAnotherType) {
  ASSERT_TRUE(LoadActorLibrary(kPlugin).ok());
  ActorSystem system;
  absl::StatusOr<UntypedActorHandle> h = system.SpawnByName("PluginEcho", {});
  ASSERT_TRUE(h.ok()) << h.status();
  // It serves EchoRole, but a local actor runs through its own member pointers.
  absl::StatusOr<ActorHandle<EchoRole>> as = h->As<EchoRole>();
  EXPECT_EQ(as.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(as.status().message()), HasSubstr("is a PluginEcho"));
}

TEST(ActorLibraryTest, BadLibrariesGetAnErrorNamingThePath) {
  absl::StatusOr<std::vector<std::string>> missing = LoadActorLibrary("no/such/libx.so");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("actor library no/such/libx.so: file not found"));

  absl::StatusOr<std::vector<std::string>> dir = LoadActorLibrary("runtime");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("is a directory"));

  const std::string text = std::filesystem::temp_directory_path() / "troupe_not_a_library.so";
  std::ofstream(text) << "not an ELF file\n";
  absl::StatusOr<std::vector<std::string>> junk = LoadActorLibrary(text);
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(junk.status().message()), HasSubstr("cannot load it"));
  std::remove(text.c_str());

  absl::StatusOr<std::vector<std::string>> empty =
      LoadActorLibrary("runtime/testing/libtest_empty_plugin.so");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("exports no actor type"));
}

TEST(ActorLibraryTest, AClashingTypeNameIsAnErrorNotAnAbort) {
  absl::StatusOr<std::vector<std::string>> clash =
      LoadActorLibrary("runtime/testing/libtest_clashing_plugin.so");
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(clash.status().message()),
              HasSubstr("cannot register actor type EchoRole"));
  // The program's own EchoRole is untouched.
  const ActorTypeInfo* role = ActorRegistry::Global().Find("EchoRole");
  ASSERT_NE(role, nullptr);
  EXPECT_EQ(role->type, std::type_index(typeid(EchoRole)));
}

}  // namespace
}  // namespace troupe::testing
