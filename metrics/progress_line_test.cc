#include "metrics/progress_line.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

// Records what a ProgressLine writes, as a terminal or as a log file of a given width.
class RecordingSink : public TerminalSink {
 public:
  RecordingSink(bool tty, int columns) : tty_(tty), columns_(columns) {}
  bool IsTty() override { return tty_; }
  int Columns() override { return columns_; }
  void Write(absl::string_view text) override {
    out.append(text.data(), text.size());
    writes.emplace_back(text);
  }
  void set_columns(int columns) { columns_ = columns; }

  std::string out;
  std::vector<std::string> writes;

 private:
  bool tty_;
  int columns_;
};

// A clock the test moves by hand.
struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1796200000);
  std::function<absl::Time()> Function() {
    return [this] { return now; };
  }
  void Advance(double seconds) { now += absl::Seconds(seconds); }
};

int Columns(absl::string_view s) {
  int width = 0;
  for (unsigned char c : s) width += (c & 0xC0) != 0x80;
  return width;
}

TEST(ProgressLine, RendersStepBarPercentFieldsRateAndEta) {
  RecordingSink sink(/*tty=*/true, 200);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 200;
  options.max_bar_width = 10;
  options.smoothing = 1.0;  // The latest interval alone.
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(0);
  clock.Advance(37 / 2.1);
  progress.Update(37, {{"reward", 0.41}, {"acc", 0.62}});
  // 37/200 of 10 cells = 1.85 cells: one full cell and 6/8 of the next. 163 steps left at
  // 2.1 steps/s = 77.6 s.
  EXPECT_EQ(progress.Render(0, true),
            "step 37/200 \u2595\u2588\u258A        \u258F 18% | reward 0.41 | acc 0.62 | "
            "2.1 steps/s | ETA 1m18s");
  EXPECT_EQ(progress.Render(0, false),
            "step 37/200 18% | reward 0.41 | acc 0.62 | 2.1 steps/s | ETA 1m18s");
}

TEST(ProgressLine, FillsTheWholeBarAtTheLastStep) {
  RecordingSink sink(true, 200);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 8;
  options.max_bar_width = 4;
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(8);
  EXPECT_EQ(progress.Render(0, true),
            "step 8/8 \u2595\u2588\u2588\u2588\u2588\u258F 100% | -- steps/s | ETA 0s");
}

TEST(ProgressLine, ShowsSecondsPerStepWhenSlowerThanOneStepPerSecond) {
  RecordingSink sink(true, 200);
  FakeClock clock;
  ProgressLine progress({.total_steps = 10}, &sink, clock.Function());
  progress.Update(0);
  clock.Advance(8);
  progress.Update(2);
  EXPECT_THAT(progress.seconds_per_step(), Optional(4.0));
  EXPECT_THAT(progress.eta(), Optional(absl::Seconds(32)));
  EXPECT_THAT(progress.Render(0, false), HasSubstr("| 4.0 s/step | ETA 32s"));
}

TEST(ProgressLine, HasNoRateOrEtaBeforeTheSecondUpdate) {
  RecordingSink sink(true, 200);
  FakeClock clock;
  ProgressLine progress({.total_steps = 10}, &sink, clock.Function());
  progress.Update(3);
  EXPECT_EQ(progress.seconds_per_step(), std::nullopt);
  EXPECT_EQ(progress.eta(), std::nullopt);
  EXPECT_EQ(progress.Render(0, false), "step 3/10 30% | -- steps/s | ETA --");
}

TEST(ProgressLine, AveragesSecondsPerStepExponentially) {
  RecordingSink sink(true, 200);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 100;
  options.smoothing = 0.5;
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(0);
  clock.Advance(1);
  progress.Update(1);  // First sample: 1 s.
  EXPECT_THAT(progress.seconds_per_step(), Optional(1.0));
  clock.Advance(3);
  progress.Update(2);  // 1 + 0.5 * (3 - 1).
  EXPECT_THAT(progress.seconds_per_step(), Optional(2.0));
  clock.Advance(1);
  progress.Update(3);  // 2 + 0.5 * (1 - 2).
  EXPECT_THAT(progress.seconds_per_step(), Optional(1.5));
  EXPECT_THAT(progress.eta(), Optional(absl::Seconds(1.5 * 97)));
}

TEST(ProgressLine, CountsAMultiStepUpdateAsThatManyOneStepUpdates) {
  RecordingSink sink(true, 200);
  ProgressLineOptions options;
  options.smoothing = 0.5;
  FakeClock dense_clock, sparse_clock;
  ProgressLine dense(options, &sink, dense_clock.Function());
  ProgressLine sparse(options, &sink, sparse_clock.Function());
  dense.Update(0);
  sparse.Update(0);
  // Steps take 1, 1, 3 and 3 seconds; `sparse` only hears about steps 2 and 4.
  const double seconds[] = {1, 1, 3, 3};
  for (int step = 1; step <= 4; ++step) {
    dense_clock.Advance(seconds[step - 1]);
    sparse_clock.Advance(seconds[step - 1]);
    dense.Update(step);
    if (step % 2 == 0) sparse.Update(step);
  }
  // Dense: 1, 1, 1 + .5 * (3 - 1) = 2, 2 + .5 * (3 - 2) = 2.5.
  // Sparse: 1 (2 s / 2 steps), then 1 + (1 - .5^2) * (3 - 1) = 2.5.
  EXPECT_THAT(dense.seconds_per_step(), Optional(2.5));
  EXPECT_THAT(sparse.seconds_per_step(), Optional(2.5));
}

TEST(ProgressLine, RestartsTheAverageWhenTheStepGoesBack) {
  RecordingSink sink(true, 200);
  FakeClock clock;
  ProgressLine progress({.total_steps = 100}, &sink, clock.Function());
  progress.Update(10);
  clock.Advance(5);
  progress.Update(20);
  ASSERT_TRUE(progress.seconds_per_step().has_value());
  clock.Advance(5);
  progress.Update(15);  // E.g. resumed from an earlier checkpoint.
  EXPECT_EQ(progress.seconds_per_step(), std::nullopt);
}

TEST(ProgressLine, LeavesOutWhatIsUnknownWithoutATotal) {
  RecordingSink sink(true, 200);
  FakeClock clock;
  ProgressLine progress({}, &sink, clock.Function());
  progress.Update(0);
  clock.Advance(18.5);
  progress.Update(37, {{"loss", 0.5}});
  EXPECT_EQ(progress.Render(0, true), "step 37 | loss 0.5 | 2.0 steps/s");
  EXPECT_EQ(progress.eta(), std::nullopt);
}

TEST(ProgressLine, FormatsDurations) {
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Seconds(0)), "0s");
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Seconds(-3)), "0s");
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Seconds(45.4)), "45s");
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Seconds(59.6)), "1m00s");
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Seconds(77)), "1m17s");
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Hours(2) + absl::Minutes(3)), "2h03m");
  EXPECT_EQ(ProgressLine::FormatDuration(absl::Hours(76)), "3d04h");
}

TEST(ProgressLine, FormatsValuesCompactly) {
  EXPECT_EQ(ProgressLine::FormatValue(0.41), "0.41");
  EXPECT_EQ(ProgressLine::FormatValue(0.4123), "0.412");
  EXPECT_EQ(ProgressLine::FormatValue(12.34), "12.3");
  EXPECT_EQ(ProgressLine::FormatValue(-7), "-7");
  EXPECT_EQ(ProgressLine::FormatValue(999.7), "1000");
  EXPECT_EQ(ProgressLine::FormatValue(12345), "12345");
  EXPECT_EQ(ProgressLine::FormatValue(2.5e7), "2.50e+07");
  EXPECT_EQ(ProgressLine::FormatValue(0.0004), "4.00e-04");
  EXPECT_EQ(ProgressLine::FormatValue(0), "0");
  EXPECT_EQ(ProgressLine::FormatValue(NAN), "nan");
  EXPECT_EQ(ProgressLine::FormatValue(-INFINITY), "-inf");
}

TEST(ProgressLine, OnATerminalRedrawsInPlaceAndBlanksLeftovers) {
  RecordingSink sink(/*tty=*/true, 120);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 100;
  options.redraw_interval = absl::Seconds(1);
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(0, {{"reward", 0.123}});
  ASSERT_EQ(sink.writes.size(), 1u);
  EXPECT_EQ(sink.writes[0][0], '\r');
  EXPECT_THAT(sink.out, Not(HasSubstr("\n")));

  clock.Advance(0.5);
  progress.Update(1, {{"reward", 0.5}});  // Within the redraw interval: not drawn.
  EXPECT_EQ(sink.writes.size(), 1u);
  clock.Advance(0.5);
  progress.Update(2);  // Shorter than the line on screen: padded over.
  ASSERT_EQ(sink.writes.size(), 2u);
  const std::string& redraw = sink.writes[1];
  EXPECT_EQ(redraw[0], '\r');
  EXPECT_EQ(Columns(redraw) - 1, Columns(sink.writes[0]) - 1);  // Same width on screen.
  EXPECT_EQ(redraw.back(), ' ');

  progress.Update(100);  // The last step is always drawn.
  EXPECT_EQ(sink.writes.size(), 3u);
  EXPECT_THAT(sink.writes[2], HasSubstr("step 100/100"));
  progress.Finish();
  EXPECT_EQ(sink.writes.back(), "\n");
  const size_t count = sink.writes.size();
  progress.Finish();  // Idempotent.
  EXPECT_EQ(sink.writes.size(), count);
}

TEST(ProgressLine, NeverDrawsWiderThanTheTerminal) {
  FakeClock clock;
  for (int columns = 2; columns <= 130; ++columns) {
    RecordingSink sink(/*tty=*/true, columns);
    ProgressLineOptions options;
    options.total_steps = 2000;
    options.redraw_interval = absl::ZeroDuration();
    ProgressLine progress(options, &sink, clock.Function());
    progress.Update(0);
    clock.Advance(3);
    progress.Update(1234, {{"reward", 0.41}, {"acc", 0.62}, {"kl", 0.0031}});
    for (const std::string& write : sink.writes) {
      EXPECT_LE(Columns(write) - 1, columns - 1) << columns << ": " << write;  // Minus the '\r'.
    }
  }
}

TEST(ProgressLine, ShrinksTheBarThenDropsTheLastFieldsOnANarrowTerminal) {
  RecordingSink sink(/*tty=*/true, 200);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 200;
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(0);
  clock.Advance(10);
  progress.Update(20, {{"reward", 0.41}, {"acc", 0.62}});
  const std::string full = progress.Render(0, false);
  ASSERT_EQ(full, "step 20/200 10% | reward 0.41 | acc 0.62 | 2.0 steps/s | ETA 1m30s");
  const int text = Columns(full);
  // Room for the text and a bar of 8 cells: the bar shrinks to fit.
  EXPECT_EQ(Columns(progress.Render(text + 11, true)), text + 11);
  // Room for the text and less than a 5-cell bar: no bar.
  EXPECT_EQ(progress.Render(text + 7, true), full);
  // One column short of the text: "acc" goes first, then "reward", the rate, the ETA and the
  // percentage; then the line is cut.
  EXPECT_EQ(progress.Render(text - 1, false),
            "step 20/200 10% | reward 0.41 | 2.0 steps/s | ETA 1m30s");
  EXPECT_EQ(progress.Render(41, false), "step 20/200 10% | 2.0 steps/s | ETA 1m30s");
  EXPECT_EQ(progress.Render(40, false), "step 20/200 10% | ETA 1m30s");
  EXPECT_EQ(progress.Render(16, false), "step 20/200 10%");
  EXPECT_EQ(progress.Render(8, false), "step 20/");
  // The columns freed by dropping "acc" (11) hold a 7-cell bar.
  EXPECT_EQ(Columns(progress.Render(text - 1, true)), text - 1);
  EXPECT_THAT(progress.Render(text - 1, true), HasSubstr("\u258F 10% | reward 0.41 |"));
}

TEST(ProgressLine, FollowsTheTerminalWhenItIsResized) {
  RecordingSink sink(/*tty=*/true, 120);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 200;
  options.redraw_interval = absl::ZeroDuration();
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(10, {{"reward", 0.41}});
  sink.set_columns(30);
  progress.Update(11, {{"reward", 0.41}});
  EXPECT_LE(Columns(sink.writes.back()) - 1, 29);
}

TEST(ProgressLine, WithoutATerminalPrintsPlainLinesAtIntervals) {
  RecordingSink sink(/*tty=*/false, 0);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 100;
  options.plain_interval = absl::Seconds(30);
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(0);  // The first update is printed.
  for (int step = 1; step <= 100; ++step) {
    clock.Advance(1);
    progress.Update(step, {{"reward", step / 100.0}});
  }
  progress.Finish();  // The last step was already printed: nothing more.
  EXPECT_THAT(sink.out, Not(HasSubstr("\r")));
  EXPECT_THAT(sink.out, Not(HasSubstr("\u2588")));
  std::vector<std::string> lines = absl::StrSplit(sink.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u);  // Steps 0, 30, 60, 90 and the last one.
  EXPECT_THAT(lines[0], HasSubstr("step 0/100 0%"));
  EXPECT_THAT(lines[1], HasSubstr("step 30/100 30% | reward 0.3 | 1.0 steps/s | ETA 1m10s"));
  EXPECT_THAT(lines[3], HasSubstr("step 90/100"));
  EXPECT_EQ(lines[4], "step 100/100 100% | reward 1 | 1.0 steps/s | ETA 0s");
}

TEST(ProgressLine, WithoutATerminalFinishPrintsAStateNotYetPrinted) {
  RecordingSink sink(/*tty=*/false, 0);
  FakeClock clock;
  ProgressLine progress({.total_steps = 100}, &sink, clock.Function());
  progress.Update(0);
  clock.Advance(1);
  progress.Update(7);
  EXPECT_EQ(sink.writes.size(), 1u);
  progress.Finish();
  ASSERT_EQ(sink.writes.size(), 2u);
  EXPECT_THAT(sink.writes[1], HasSubstr("step 7/100"));
  EXPECT_EQ(sink.writes[1].back(), '\n');
}

TEST(ProgressLine, ClearErasesTheLineAndTheNextUpdateRedrawsIt) {
  RecordingSink sink(/*tty=*/true, 100);
  FakeClock clock;
  ProgressLineOptions options;
  options.total_steps = 10;
  options.redraw_interval = absl::Hours(1);
  ProgressLine progress(options, &sink, clock.Function());
  progress.Update(1);
  const int width = Columns(sink.writes[0]) - 1;
  progress.Clear();
  EXPECT_EQ(sink.writes.back(), "\r" + std::string(width, ' ') + "\r");
  progress.Update(2);  // Redrawn despite the long redraw interval.
  EXPECT_THAT(sink.writes.back(), HasSubstr("step 2/10"));
}

TEST(ProgressLine, DestructionEndsTheTerminalLine) {
  RecordingSink sink(/*tty=*/true, 100);
  {
    ProgressLine progress({.total_steps = 10}, &sink);
    progress.Update(1);
  }
  EXPECT_EQ(sink.out.back(), '\n');
}

TEST(ProgressLine, WritesNothingIfNeverUpdated) {
  RecordingSink sink(/*tty=*/true, 100);
  { ProgressLine progress({.total_steps = 10}, &sink); }
  EXPECT_EQ(sink.out, "");
}

}  // namespace
}  // namespace troupe::metrics
