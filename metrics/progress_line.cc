#include "metrics/progress_line.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::metrics {
namespace {

// Bar characters: full cell, partial cells in eighths (left-aligned blocks), and the brackets.
constexpr const char* kFullCell = "\u2588";
constexpr const char* kEighths[8] = {"",       "\u258F", "\u258E", "\u258D",
                                     "\u258C", "\u258B", "\u258A", "\u2589"};
constexpr const char* kBarLeft = "\u2595";
constexpr const char* kBarRight = "\u258F";
constexpr int kMinBarCells = 5;
constexpr int kDefaultTtyColumns = 80;

// Display width: one column per code point (UTF-8 continuation bytes do not count).
int Width(absl::string_view s) {
  int width = 0;
  for (unsigned char c : s) width += (c & 0xC0) != 0x80;
  return width;
}

// The longest prefix of `s` at most `width` columns wide, cut at a code point boundary.
std::string Prefix(absl::string_view s, int width) {
  int columns = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && columns++ == width) {
      return std::string(s.substr(0, i));
    }
  }
  return std::string(s);
}

std::string Bar(double fraction, int cells) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int eighths = static_cast<int>(std::floor(fraction * cells * 8));
  std::string bar = kBarLeft;
  int used = 0;
  for (; used < eighths / 8; ++used) bar += kFullCell;
  if (eighths % 8 != 0) {
    bar += kEighths[eighths % 8];
    ++used;
  }
  bar.append(cells - used, ' ');
  bar += kBarRight;
  return bar;
}

class StderrTerminal : public TerminalSink {
 public:
  bool IsTty() override { return ::isatty(STDERR_FILENO) == 1; }

  int Columns() override {
    if (const char* env = std::getenv("COLUMNS")) {
      int columns = 0;
      if (absl::SimpleAtoi(env, &columns) && columns > 0) return columns;
    }
    struct winsize size = {};
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 0;
  }

  void Write(absl::string_view text) override {
    while (!text.empty()) {
      const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // Nowhere to report a broken stderr.
      text.remove_prefix(static_cast<size_t>(n));
    }
  }
};

ProgressLineOptions Sanitize(ProgressLineOptions options) {
  if (!(options.smoothing > 0)) options.smoothing = 1e-3;
  options.smoothing = std::min(options.smoothing, 1.0);
  options.total_steps = std::max<int64_t>(options.total_steps, 0);
  options.max_bar_width = std::max(options.max_bar_width, 0);
  options.redraw_interval = std::max(options.redraw_interval, absl::ZeroDuration());
  options.plain_interval = std::max(options.plain_interval, absl::ZeroDuration());
  return options;
}

}  // namespace

TerminalSink& StderrSink() {
  static TerminalSink* const sink = new StderrTerminal();  // Never destroyed: usable at exit.
  return *sink;
}

ProgressLine::ProgressLine(ProgressLineOptions options, TerminalSink* sink,
                           std::function<absl::Time()> clock)
    : options_(Sanitize(options)),
      sink_(sink != nullptr ? sink : &StderrSink()),
      clock_(clock ? std::move(clock) : [] { return absl::Now(); }) {}

ProgressLine::~ProgressLine() { Finish(); }

void ProgressLine::Update(int64_t step, const Fields& fields) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_();
  if (!updated_ || step < last_step_) {
    last_step_ = step;
    last_time_ = now;
    seconds_per_step_.reset();
  } else if (step > last_step_) {
    const double steps = static_cast<double>(step - last_step_);
    const double sample = absl::ToDoubleSeconds(now - last_time_) / steps;
    if (!seconds_per_step_.has_value()) {
      seconds_per_step_ = sample;
    } else {
      const double weight = 1 - std::pow(1 - options_.smoothing, steps);
      *seconds_per_step_ += weight * (sample - *seconds_per_step_);
    }
    last_step_ = step;
    last_time_ = now;
  }
  updated_ = true;
  finished_ = false;
  step_ = step;
  fields_ = fields;
  dirty_ = true;

  if (sink_->IsTty()) {
    if (!line_open_ || IsFinalLocked() || now - last_draw_ >= options_.redraw_interval) {
      DrawLocked();
      last_draw_ = now;
    }
  } else if (shown_.empty() || IsFinalLocked() || now - last_draw_ >= options_.plain_interval) {
    PrintLocked(now);
  }
}

void ProgressLine::Clear() {
  absl::MutexLock lock(&mu_);
  if (!line_open_) return;
  sink_->Write(absl::StrCat("\r", std::string(drawn_width_, ' '), "\r"));
  line_open_ = false;
  drawn_width_ = 0;
}

void ProgressLine::Finish() {
  absl::MutexLock lock(&mu_);
  if (!updated_ || finished_) return;
  if (sink_->IsTty()) {
    if (dirty_ || !line_open_) DrawLocked();
    sink_->Write("\n");
    line_open_ = false;
    drawn_width_ = 0;
  } else {
    PrintLocked(clock_());
  }
  finished_ = true;
}

void ProgressLine::DrawLocked() {
  const int columns = sink_->Columns();
  const int max_width = (columns > 0 ? columns : kDefaultTtyColumns) - 1;
  const std::string line = RenderLocked(std::max(max_width, 1), /*with_bar=*/true);
  const int width = Width(line);
  std::string out = absl::StrCat("\r", line);
  // Blank out the rest of a longer previous line (never past the current width).
  const int blank = std::min(drawn_width_, max_width) - width;
  if (blank > 0) out.append(blank, ' ');
  sink_->Write(out);
  line_open_ = true;
  drawn_width_ = width;
  shown_ = line;
  dirty_ = false;
}

void ProgressLine::PrintLocked(absl::Time now) {
  const int columns = sink_->Columns();
  const std::string line = RenderLocked(columns > 1 ? columns - 1 : 0, /*with_bar=*/false);
  if (line == shown_) return;
  sink_->Write(absl::StrCat(line, "\n"));
  shown_ = line;
  last_draw_ = now;
  dirty_ = false;
}

bool ProgressLine::IsFinalLocked() const {
  return options_.total_steps > 0 && step_ >= options_.total_steps;
}

std::optional<double> ProgressLine::seconds_per_step() const {
  absl::MutexLock lock(&mu_);
  return seconds_per_step_;
}

std::optional<double> ProgressLine::RateLocked() const {
  if (!seconds_per_step_.has_value() || *seconds_per_step_ <= 0) return std::nullopt;
  return 1.0 / *seconds_per_step_;
}

std::optional<absl::Duration> ProgressLine::eta() const {
  absl::MutexLock lock(&mu_);
  if (options_.total_steps <= 0) return std::nullopt;
  if (step_ >= options_.total_steps) return absl::ZeroDuration();
  if (!seconds_per_step_.has_value()) return std::nullopt;
  return absl::Seconds(*seconds_per_step_ * static_cast<double>(options_.total_steps - step_));
}

std::string ProgressLine::Render(int max_width, bool with_bar) const {
  absl::MutexLock lock(&mu_);
  return RenderLocked(max_width, with_bar);
}

std::string ProgressLine::RenderLocked(int max_width, bool with_bar) const {
  const int64_t total = options_.total_steps;
  const std::string head =
      total > 0 ? absl::StrCat("step ", step_, "/", total) : absl::StrCat("step ", step_);
  std::string percent, eta_text;
  if (total > 0) {
    percent = absl::StrCat(std::clamp<int64_t>(step_ * 100 / total, 0, 100), "%");
    std::optional<absl::Duration> left;
    if (step_ >= total) {
      left = absl::ZeroDuration();
    } else if (seconds_per_step_.has_value()) {
      left = absl::Seconds(*seconds_per_step_ * static_cast<double>(total - step_));
    }
    eta_text = absl::StrCat("ETA ", left.has_value() ? FormatDuration(*left) : "--");
  }
  std::string rate_text = "-- steps/s";
  if (std::optional<double> rate = RateLocked(); rate.has_value()) {
    if (*rate >= 1) {
      rate_text = absl::StrFormat(*rate >= 100 ? "%.0f steps/s" : "%.1f steps/s", *rate);
    } else {
      const double seconds = 1.0 / *rate;
      rate_text = absl::StrFormat(seconds >= 100 ? "%.0f s/step" : "%.1f s/step", seconds);
    }
  }

  size_t fields = fields_.size();
  bool show_rate = true, show_eta = !eta_text.empty(), show_percent = !percent.empty();
  auto compose = [&](int bar_cells) {
    std::string line = head;
    if (bar_cells > 0) {
      absl::StrAppend(&line, " ", Bar(static_cast<double>(step_) / total, bar_cells));
    }
    if (show_percent) absl::StrAppend(&line, " ", percent);
    for (size_t i = 0; i < fields; ++i) {
      absl::StrAppend(&line, " | ", fields_[i].first, " ", FormatValue(fields_[i].second));
    }
    if (show_rate) absl::StrAppend(&line, " | ", rate_text);
    if (show_eta) absl::StrAppend(&line, " | ", eta_text);
    return line;
  };

  std::string line = compose(0);
  // Too long: drop the caller's fields from the last, then rate, ETA and percentage.
  while (max_width > 0 && Width(line) > max_width) {
    if (fields > 0) {
      --fields;
    } else if (show_rate) {
      show_rate = false;
    } else if (show_eta) {
      show_eta = false;
    } else if (show_percent) {
      show_percent = false;
    } else {
      return Prefix(line, max_width);
    }
    line = compose(0);
  }
  if (with_bar && total > 0 && options_.max_bar_width > 0) {
    int cells = options_.max_bar_width;
    if (max_width > 0) cells = std::min(cells, max_width - Width(line) - 3);  // " ▕" + "▏".
    if (cells >= std::min(kMinBarCells, options_.max_bar_width)) line = compose(cells);
  }
  return line;
}

std::string ProgressLine::FormatDuration(absl::Duration d) {
  const int64_t s = std::max<int64_t>(std::llround(absl::ToDoubleSeconds(d)), 0);
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string ProgressLine::FormatValue(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 999999.5 || a < 1e-3) return absl::StrFormat("%.2e", v);
  if (a >= 999.5) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.3g", v);
}

}  // namespace troupe::metrics
