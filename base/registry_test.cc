#include "base/registry.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Registry, FindsWhatWasAddedAndNothingElse) {
  Registry<int> r("widget");
  ASSERT_TRUE(r.Add("b", 2).ok());
  ASSERT_TRUE(r.Add("a", 1).ok());
  ASSERT_NE(r.Find("a"), nullptr);
  EXPECT_EQ(*r.Find("a"), 1);
  EXPECT_EQ(*r.Find("b"), 2);
  EXPECT_EQ(r.Find("c"), nullptr);
  absl::StatusOr<const int*> b = r.Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(**b, 2);
}

TEST(Registry, RefusesADuplicateNameAndKeepsTheFirstEntry) {
  Registry<int> r("widget");
  ASSERT_TRUE(r.Add("a", 1).ok());
  absl::Status dup = r.Add("a", 7);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "widget 'a' is already registered");
  EXPECT_EQ(*r.Find("a"), 1);
  EXPECT_EQ(r.Add("", 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Registry, NamesAreSortedAndNotFoundListsThem) {
  Registry<std::string> r("gadget");
  ASSERT_TRUE(r.Add("zeta", "z").ok());
  ASSERT_TRUE(r.Add("alpha", "a").ok());
  ASSERT_TRUE(r.Add("mid", "m").ok());
  EXPECT_THAT(r.Names(), ElementsAre("alpha", "mid", "zeta"));
  absl::StatusOr<const std::string*> missing = r.Get("omega");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "no gadget 'omega' is registered (registered: alpha, mid, zeta)");
}

TEST(Registry, EntryPointersStayValidAsTheRegistryGrows) {
  Registry<int> r("widget");
  ASSERT_TRUE(r.Add("first", 1).ok());
  const int* first = r.Find("first");
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(r.Add("n" + std::to_string(i), i).ok());
  EXPECT_EQ(r.Find("first"), first);
  EXPECT_EQ(*first, 1);
}

using Callback = std::function<int(int)>;
Registry<Callback>& Callbacks() {
  static Registry<Callback>* r = new Registry<Callback>("callback");
  return *r;
}
int Twice(int x) { return 2 * x; }
TROUPE_REGISTER_IN(Callbacks(), "twice", Twice);
TROUPE_REGISTER_IN(Callbacks(), "square", [](int x) { return x * x; });

TEST(Registry, StaticRegistrationRunsBeforeMain) {
  EXPECT_THAT(Callbacks().Names(), ElementsAre("square", "twice"));
  EXPECT_EQ((*Callbacks().Find("twice"))(4), 8);
  EXPECT_EQ((*Callbacks().Find("square"))(4), 16);
}

TEST(RegistryDeathTest, StaticRegistrationOfATakenNameAborts) {
  EXPECT_DEATH(RegisterStatically(Callbacks(), "twice", Callback(Twice)),
               HasSubstr("callback 'twice' is already registered"));
}

}  // namespace
}  // namespace troupe
