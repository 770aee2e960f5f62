#include "recipes/rl/run_state.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "metrics/progress_line.h"

namespace troupe::recipes {
namespace {

// A terminal that records what is written to it.
class Terminal : public metrics::TerminalSink {
 public:
  bool IsTty() override { return true; }
  int Columns() override { return 80; }
  void Write(absl::string_view text) override { out.append(text.data(), text.size()); }
  std::string out;
};

TEST(LogAboveProgress, ALogLineClearsTheBarFirstAndTheBarComesBack) {
  Terminal terminal;
  metrics::ProgressLine bar({.total_steps = 10}, &terminal);
  std::vector<std::string> lines;
  RunOptions options;
  options.log = [&](const std::string& line) {
    terminal.out += line + "\n";  // as the CLI prints it, to the same terminal
    lines.push_back(line);
  };
  RunOptions wrapped = LogAboveProgress(options, [&] { return &bar; });
  bar.Update(3, {});
  const size_t drawn = terminal.out.size();
  ASSERT_GT(drawn, 0u);
  wrapped.log("eval at step 3");
  ASSERT_EQ(lines.size(), 1u);
  // The bar was wiped ("\r<spaces>\r") before the line, so the line starts a clean row.
  const std::string after = terminal.out.substr(drawn);
  EXPECT_EQ(after.rfind("\r", 0), 0u) << after;
  EXPECT_NE(after.find("\reval at step 3\n"), std::string::npos) << after;
  bar.Update(4, {});
  EXPECT_NE(terminal.out.find("4/10", drawn), std::string::npos) << terminal.out;

  // No bar (yet): the line goes through as it is.
  RunOptions no_bar = LogAboveProgress(options, [] { return nullptr; });
  no_bar.log("starting actors");
  EXPECT_EQ(lines.back(), "starting actors");
}

}  // namespace
}  // namespace troupe::recipes
