// Line, scatter and horizontal bar charts as standalone SVG text, for the tuning
// reports that `kiln report` writes (embeddable inline in HTML; no dependencies).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::client::svg {

// One data series. Points whose x or y is NaN or infinite (or <= 0 on a log axis)
// are skipped; a line joins the remaining points in the given order.
struct Series {
  std::string name;          // legend label ("" = not in the legend)
  std::vector<double> x, y;  // same length (a mismatch: the extra values are ignored)
  bool step = false;         // LineChart: draw as a step function (best-so-far curves)
  bool markers = false;      // LineChart: also draw a small circle at each point
  bool line = true;          // LineChart: false draws the points only (as markers)
};

struct ChartOptions {
  std::string title, x_label, y_label;
  int width = 640, height = 360;      // pixels of the whole <svg>; raised to at least kMinWidth x kMinHeight
  bool log_x = false, log_y = false;  // log10 axes (ticks at powers of ten, and 2, 5 between when few decades)
  // LineChart, ScatterChart: values the y axis must cover as well as the data
  // (e.g. 0, or a baseline), so that a small change is not drawn as a large one.
  std::vector<double> y_include;
};

// Layout of LineChart and ScatterChart. The plot area is the <svg> minus these
// margins; with a legend (more than one named series) it sits right of the plot
// and the right margin grows by its width. A linear axis spans the data range
// widened by 5% of that range on each side; a log axis does the same in log10
// space. A single distinct value v is widened to v +- 10% (+-1 for 0), or half a
// decade on a log axis.
inline constexpr int kMarginLeft = 72;  // y tick labels and the y axis label
inline constexpr int kMarginRight = 16;
inline constexpr int kMarginTop = 36;     // the title
inline constexpr int kMarginBottom = 48;  // x tick labels and the x axis label
inline constexpr int kMinWidth = 160;
inline constexpr int kMinHeight = 100;

// All charts produce one complete <svg xmlns=...> element with a <title> (the
// chart title, or "Chart" without one), and "no data" text in place of the plot
// when nothing can be drawn. Coordinates have one decimal; the same input always
// gives the same bytes, and the output never contains NaN or infinity.
//
// Lines through each series' points; colours from the Okabe-Ito palette by series
// index. A series with a single point is drawn as a marker.
std::string LineChart(const ChartOptions& options, const std::vector<Series>& series);
// Points only; with `diagonal`, the y = x line across the range the two axes have
// in common (predicted vs measured).
std::string ScatterChart(const ChartOptions& options, const std::vector<Series>& series, bool diagonal);

struct Bar {
  std::string label;
  double value = 0;
  std::string note;  // text printed right of the bar ("" = none)
};
// Horizontal bars, one row per Bar, top to bottom in the given order, scaled so
// that the largest value spans the plot width (the x axis starts at 0). Negative
// and non-finite values get an empty bar (their label and note are still shown).
// The left margin fits the labels (long ones are cut, with the full text as a
// tooltip), the right margin the notes; `y_label` is not drawn.
std::string BarChart(const ChartOptions& options, const std::vector<Bar>& bars);

// "Nice" tick values (1, 2, 5 x 10^k steps) covering [lo, hi]: the first tick is
// <= lo, the last >= hi, at most max(max_ticks, 2) of them. lo > hi is swapped;
// lo == hi (or a range too small to tick in double precision) gives ticks around
// the value, v +- 10% (+-1 for 0). Empty when lo or hi is not finite.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

// Escapes & < > " ' for XML text and attribute values; drops control characters
// that XML 1.0 does not allow (all below 0x20 except tab, newline, carriage return).
std::string EscapeXml(std::string_view text);

// A number rounded to `significant_digits` (1..17) significant digits, without
// trailing zeros: plain decimal when 1e-4 <= |rounded| < 1e7 ("1200", "0.25",
// "0.000123", "-3"), else scientific with a bare exponent ("1.23e-5", "2.5e7").
// 0 and -0 give "0"; NaN and infinities give "" (charts never print them).
std::string FormatNumber(double value, int significant_digits = 3);

}  // namespace kiln::client::svg
