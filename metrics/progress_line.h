// ProgressLine: a one-line progress display for a training loop, on stderr by default.
//
//   step 37/200 ▕████▌     ▏ 18% | reward 0.41 | acc 0.62 | 2.1 steps/s | ETA 1m17s
//
// On a terminal (TTY) the line is redrawn in place with '\r' (at most once per redraw_interval,
// always for the last step), fitted to the terminal width minus one column. Elsewhere (CI logs, a
// redirected stderr) a plain line without the bar is printed for the first update, then at most
// once per plain_interval, and for the last step.
//
// Fitting: the text comes first and the bar gets what is left (up to max_bar_width cells, none if
// fewer than 5 fit); if the text alone is too long, the caller's fields are dropped from the last,
// then the rate, the ETA and the percentage; a line still too long is cut. Width counts Unicode
// code points (the bar's block characters are one column each).
//
// Rate and ETA: an exponential moving average of the seconds per step. An update that advances n
// steps in dt seconds contributes the sample dt/n with weight 1 - (1 - smoothing)^n, i.e. as if it
// were n updates of one step, so the average does not depend on how often Update is called.
// Averaging seconds per step (not steps per second) keeps the ETA unbiased when intervals vary.
// The first Update is the baseline (no rate yet): call Update(start_step) when the loop starts so
// set-up time is not counted as a step. A step below the previous one restarts the average.
//
//   ProgressLine progress({.total_steps = 200});
//   progress.Update(0);
//   for (int64_t step = 1; step <= 200; ++step) {
//     ...
//     progress.Update(step, {{"reward", reward}, {"acc", accuracy}});
//   }
//   progress.Finish();
//
// Ownership: the sink (if given) is not owned and must outlive the ProgressLine.
// Thread-safety: all methods are thread-safe (one mutex); the sink is written under it.
#ifndef TROUPE_METRICS_PROGRESS_LINE_H_
#define TROUPE_METRICS_PROGRESS_LINE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace troupe::metrics {

// Where a progress line is drawn: the terminal in production, a recorder in tests.
class TerminalSink {
 public:
  virtual ~TerminalSink() = default;
  // Whether the output is an interactive terminal (redraw in place).
  virtual bool IsTty() = 0;
  // The terminal's width in columns; 0 if unknown.
  virtual int Columns() = 0;
  // Writes `text` as is.
  virtual void Write(absl::string_view text) = 0;
};

// The process's stderr: IsTty = isatty(2); Columns = $COLUMNS if a positive integer, else the
// TIOCGWINSZ width of fd 2, else 0. Thread-safe; lives for the whole process.
TerminalSink& StderrSink();

struct ProgressLineOptions {
  int64_t total_steps = 0;  // > 0: shows "step/total", bar, percentage and ETA; 0: unknown.
  absl::Duration redraw_interval = absl::Milliseconds(100);  // TTY: minimum time between redraws.
  absl::Duration plain_interval = absl::Seconds(30);  // Not a TTY: minimum time between lines.
  double smoothing = 0.2;  // Weight of a one-step sample in the moving average, in (0, 1].
  int max_bar_width = 20;  // Bar cells at most (the brackets add two columns).
};

class ProgressLine {
 public:
  // Named values shown after the bar, in order ("reward 0.41").
  using Fields = std::vector<std::pair<std::string, double>>;

  // `sink` null = StderrSink(); `clock` null = absl::Now. Out-of-range options are clamped
  // (smoothing to (0, 1], negative intervals and bar widths to 0).
  explicit ProgressLine(ProgressLineOptions options, TerminalSink* sink = nullptr,
                        std::function<absl::Time()> clock = nullptr);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  // Calls Finish().
  ~ProgressLine();

  // Records that `step` steps are done, with the values to show; draws or prints as described
  // above.
  void Update(int64_t step, const Fields& fields = {});

  // TTY: erases the line (so other output can be printed cleanly); the next Update redraws it.
  // Otherwise nothing.
  void Clear();

  // Draws the latest state if it is not already shown and ends the line with '\n' (TTY), so later
  // output starts on a fresh line. Idempotent until the next Update. Nothing if never updated.
  void Finish();

  // The moving average of seconds per step; nullopt before two updates with different steps.
  std::optional<double> seconds_per_step() const;
  // Time left: seconds_per_step * (total - step); nullopt without a total or an average.
  std::optional<absl::Duration> eta() const;

  // The line for the current state, at most `max_width` columns (0 = no limit), with or without
  // the bar. Exposed for tests and for callers that print the line elsewhere.
  std::string Render(int max_width, bool with_bar) const;

  // Formatting helpers (exposed for tests). "45s", "1m17s", "2h03m", "3d04h"; negative -> "0s".
  static std::string FormatDuration(absl::Duration d);
  // 0.41 -> "0.41", 12.34 -> "12.3", 12345 -> "12345", 0.0004 -> "4.00e-04", NaN -> "nan".
  static std::string FormatValue(double v);

 private:
  std::string RenderLocked(int max_width, bool with_bar) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<double> RateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // TTY: redraws the line in place.
  void DrawLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Not a TTY: prints the line with '\n'.
  void PrintLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsFinalLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ProgressLineOptions options_;
  TerminalSink* const sink_;
  const std::function<absl::Time()> clock_;

  mutable absl::Mutex mu_;
  bool updated_ ABSL_GUARDED_BY(mu_) = false;  // Any Update since construction.
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  Fields fields_ ABSL_GUARDED_BY(mu_);
  // Moving average state: the previous update's step and time.
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_time_ ABSL_GUARDED_BY(mu_);
  std::optional<double> seconds_per_step_ ABSL_GUARDED_BY(mu_);
  // What is on screen. TTY: whether a line is open (not ended by '\n' or cleared), its width and
  // when it was drawn. Not a TTY: the last printed line and when.
  bool line_open_ ABSL_GUARDED_BY(mu_) = false;
  int drawn_width_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_draw_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string shown_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;  // State changed since last shown.
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace troupe::metrics

#endif  // TROUPE_METRICS_PROGRESS_LINE_H_
