#include "models/chat/jinja.h"

#include "gtest/gtest.h"

namespace troupe::models::jinja {
namespace {

TEST(Jinja, Smoke) {
  auto t = Template::Parse("Hello {{ name }}!", "t");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = t->Render(nlohmann::json{{"name", "x"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "Hello x!");
}

}  // namespace
}  // namespace troupe::models::jinja
