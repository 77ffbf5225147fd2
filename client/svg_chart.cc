// SVG line, scatter and bar charts for `kiln report`: axes, ticks, legend and
// series built as plain text, with every number and string made safe for XML.
#include "client/svg_chart.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace kiln::client::svg {
namespace {

// Okabe-Ito, ordered for contrast on white (its yellow last).
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr const char* kAxisColor = "#333333";
constexpr const char* kGridColor = "#e5e5e5";
// Approximate advance of one character at the 12 px font, for sizing margins.
constexpr double kCharWidth = 7;
constexpr double kPadFraction = 0.05;

const char* SeriesColor(size_t index) { return kPalette[index % std::size(kPalette)]; }

// A pixel coordinate with one decimal. Non-finite values cannot arise from the
// layout below; printing "0.0" for them keeps that promise out of the output.
std::string Px(double value) {
  if (!std::isfinite(value)) return "0.0";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed, 1);
  std::string text(buffer, result.ptr);
  return text == "-0.0" ? "0.0" : text;
}

int CharCount(std::string_view text) {  // UTF-8 code points
  return static_cast<int>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// At most `max_chars` code points, the last one an ellipsis when cut.
std::string Truncate(std::string_view text, int max_chars) {
  if (CharCount(text) <= max_chars) return std::string(text);
  if (max_chars <= 0) return "";
  int kept = 0;
  size_t end = 0;
  for (; end < text.size(); ++end) {
    if ((text[end] & 0xC0) != 0x80 && kept++ == max_chars - 1) break;
  }
  return std::string(text.substr(0, end)) + "\xE2\x80\xA6";
}

double HalfWidthAround(double value) { return value == 0 ? 1 : 0.1 * std::abs(value); }

// True when [lo, hi] is too narrow to place distinct ticks in double precision.
bool TooNarrow(double lo, double hi) { return hi - lo <= 1e-12 * std::max(std::abs(lo), std::abs(hi)); }

struct Range {
  double lo = 0, hi = 0;
};

// An axis's domain: the data range widened by 5% on each side (in log10 space
// for a log axis); a single value is widened as documented in the header.
Range PaddedDomain(Range data, bool log) {
  double lo = log ? std::log10(data.lo) : data.lo;
  double hi = log ? std::log10(data.hi) : data.hi;
  if (TooNarrow(lo, hi)) {
    const double mid = 0.5 * lo + 0.5 * hi;
    const double half = log ? 0.5 : HalfWidthAround(mid);
    lo = mid - half;
    hi = mid + half;
  } else {
    const double pad = kPadFraction * (hi - lo);
    if (std::isfinite(lo - pad) && std::isfinite(hi + pad)) {
      lo -= pad;
      hi += pad;
    }
  }
  if (log) return {std::pow(10.0, lo), std::pow(10.0, hi)};
  return {lo, hi};
}

// Maps data values on one axis to pixels, linearly or in log10 space.
class Scale {
 public:
  Scale(Range domain, double pixel_lo, double pixel_hi, bool log)
      : log_(log),
        domain_(domain),
        t_lo_(T(domain.lo)),
        t_hi_(T(domain.hi)),
        pixel_lo_(pixel_lo),
        pixel_hi_(pixel_hi) {}

  double operator()(double value) const {
    // Halved terms keep (value - lo) / (hi - lo) finite for domains near the double limit.
    const double fraction = (0.5 * T(value) - 0.5 * t_lo_) / (0.5 * t_hi_ - 0.5 * t_lo_);
    return pixel_lo_ + fraction * (pixel_hi_ - pixel_lo_);
  }
  const Range& domain() const { return domain_; }
  bool log() const { return log_; }

 private:
  double T(double value) const { return log_ ? std::log10(value) : value; }

  bool log_;
  Range domain_;
  double t_lo_, t_hi_;
  double pixel_lo_, pixel_hi_;
};

// The most nice linear ticks inside `domain`, at most `max_ticks` (at least 2
// where any step allows).
std::vector<double> LinearTicksInside(Range domain, int max_ticks) {
  const double slack = 1e-9 * (domain.hi - domain.lo);
  std::vector<double> best;
  for (int n = 2; n <= max_ticks + 2; ++n) {
    std::vector<double> ticks;
    for (double tick : NiceTicks(domain.lo, domain.hi, n)) {
      if (tick >= domain.lo - slack && tick <= domain.hi + slack) ticks.push_back(tick);
    }
    if (ticks.size() <= static_cast<size_t>(std::max(max_ticks, 2)) && ticks.size() > best.size()) best = ticks;
  }
  return best;
}

// Powers of ten inside a positive domain; with few decades also 2 and 5 times
// them; with many, every k-th power; within one decade, linear ticks.
std::vector<double> LogTicksInside(Range domain, int max_ticks) {
  const double t_lo = std::log10(domain.lo), t_hi = std::log10(domain.hi);
  const int k_lo = static_cast<int>(std::ceil(t_lo - 1e-9)), k_hi = static_cast<int>(std::floor(t_hi + 1e-9));
  std::vector<double> powers, with_2_5;
  for (int k = k_lo - 1; k <= k_hi; ++k) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double tick = m * std::pow(10.0, k);
      if (tick < domain.lo * (1 - 1e-9) || tick > domain.hi * (1 + 1e-9)) continue;
      with_2_5.push_back(tick);
      if (m == 1) powers.push_back(tick);
    }
  }
  if (t_hi - t_lo <= 2.5 && with_2_5.size() <= static_cast<size_t>(max_ticks) && with_2_5.size() >= 2) {
    return with_2_5;
  }
  if (powers.size() < 2) {
    std::vector<double> ticks = LinearTicksInside(domain, max_ticks);
    ticks.erase(std::remove_if(ticks.begin(), ticks.end(), [](double t) { return t <= 0; }), ticks.end());
    return ticks;
  }
  const size_t stride = (powers.size() + max_ticks - 1) / std::max(max_ticks, 1);
  std::vector<double> ticks;
  for (size_t i = 0; i < powers.size(); i += stride) ticks.push_back(powers[i]);
  return ticks;
}

std::vector<double> TicksInside(const Scale& scale, int max_ticks) {
  return scale.log() ? LogTicksInside(scale.domain(), max_ticks) : LinearTicksInside(scale.domain(), max_ticks);
}

// Tick labels with enough digits to tell neighbours apart (at least 3 significant).
std::vector<std::string> TickLabels(const std::vector<double>& ticks) {
  double step = 0, largest = 0;
  for (size_t i = 0; i < ticks.size(); ++i) {
    largest = std::max(largest, std::abs(ticks[i]));
    if (i > 0 && (step == 0 || ticks[i] - ticks[i - 1] < step)) step = ticks[i] - ticks[i - 1];
  }
  int digits = 3;
  if (step > 0 && largest > 0) {
    digits = static_cast<int>(std::floor(std::log10(largest)) - std::floor(std::log10(step))) + 1;
    digits = std::clamp(digits, 3, 15);
  }
  std::vector<std::string> labels;
  for (double tick : ticks) labels.push_back(FormatNumber(tick, digits));
  return labels;
}

// The plot area inside the <svg>, in pixels.
struct Frame {
  double left, top, right, bottom;
  double width() const { return right - left; }
  double height() const { return bottom - top; }
};

int TickBudget(double pixels, double pixels_per_tick) {
  return std::clamp(static_cast<int>(pixels / pixels_per_tick), 2, 10);
}

std::string Text(double x, double y, std::string_view text, std::string_view attributes = "") {
  std::string out = "<text x=\"" + Px(x) + "\" y=\"" + Px(y) + "\"";
  if (!attributes.empty()) out += " " + std::string(attributes);
  return out + ">" + EscapeXml(text) + "</text>\n";
}

std::string Line(double x1, double y1, double x2, double y2) {
  return "<line x1=\"" + Px(x1) + "\" y1=\"" + Px(y1) + "\" x2=\"" + Px(x2) + "\" y2=\"" + Px(y2) + "\"/>\n";
}

// The root element, the accessible <title>, a white background and the visible title.
std::string BeginDocument(const ChartOptions& options, int width, int height) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h +
                    "\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<title>" + EscapeXml(options.title.empty() ? "Chart" : options.title) + "</title>\n";
  out += "<rect width=\"" + w + "\" height=\"" + h + "\" fill=\"#ffffff\"/>\n";
  if (!options.title.empty()) {
    out += Text(width / 2.0, 22, options.title, "text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\"");
  }
  return out;
}

std::string NoDataDocument(const ChartOptions& options, int width, int height) {
  return BeginDocument(options, width, height) +
         Text(width / 2.0, height / 2.0, "no data", "text-anchor=\"middle\" fill=\"#666666\"") + "</svg>\n";
}

std::string XAxis(const Frame& frame, const Scale& x, const std::vector<double>& ticks, const std::string& label,
                  int height) {
  const std::vector<std::string> labels = TickLabels(ticks);
  std::string grid, marks, texts;
  for (size_t i = 0; i < ticks.size(); ++i) {
    const double px = x(ticks[i]);
    grid += Line(px, frame.top, px, frame.bottom);
    marks += Line(px, frame.bottom, px, frame.bottom + 5);
    texts += Text(px, frame.bottom + 18, labels[i], "text-anchor=\"middle\" font-size=\"11\"");
  }
  std::string out = "<g stroke=\"" + std::string(kGridColor) + "\">\n" + grid + "</g>\n";
  out += "<g stroke=\"" + std::string(kAxisColor) + "\">\n" +
         Line(frame.left, frame.bottom, frame.right, frame.bottom) + marks + "</g>\n";
  out += texts;
  if (!label.empty()) out += Text(frame.left + frame.width() / 2, height - 10, label, "text-anchor=\"middle\"");
  return out;
}

std::string YAxis(const Frame& frame, const Scale& y, const std::vector<double>& ticks, const std::string& label) {
  const std::vector<std::string> labels = TickLabels(ticks);
  std::string grid, marks, texts;
  for (size_t i = 0; i < ticks.size(); ++i) {
    const double py = y(ticks[i]);
    grid += Line(frame.left, py, frame.right, py);
    marks += Line(frame.left - 5, py, frame.left, py);
    texts += Text(frame.left - 8, py + 4, labels[i], "text-anchor=\"end\" font-size=\"11\"");
  }
  std::string out = "<g stroke=\"" + std::string(kGridColor) + "\">\n" + grid + "</g>\n";
  out += "<g stroke=\"" + std::string(kAxisColor) + "\">\n" + Line(frame.left, frame.top, frame.left, frame.bottom) +
         marks + "</g>\n";
  out += texts;
  if (!label.empty()) {
    out += "<text transform=\"translate(16," + Px(frame.top + frame.height() / 2) +
           ") rotate(-90)\" text-anchor=\"middle\">" + EscapeXml(label) + "</text>\n";
  }
  return out;
}

using Points = std::vector<std::pair<double, double>>;

Points DrawablePoints(const Series& series, bool log_x, bool log_y) {
  Points points;
  const size_t n = std::min(series.x.size(), series.y.size());
  for (size_t i = 0; i < n; ++i) {
    const double x = series.x[i], y = series.y[i];
    if (!std::isfinite(x) || !std::isfinite(y) || (log_x && x <= 0) || (log_y && y <= 0)) continue;
    points.emplace_back(x, y);
  }
  return points;
}

std::string Circle(double cx, double cy, double r, const char* color, std::string_view extra = "") {
  std::string out = "<circle cx=\"" + Px(cx) + "\" cy=\"" + Px(cy) + "\" r=\"" + Px(r) + "\" fill=\"" + color + "\"";
  if (!extra.empty()) out += " " + std::string(extra);
  return out + "/>\n";
}

// The path through `points` (a step function holds each y until the next x).
std::string PathData(const Points& points, const Scale& x, const Scale& y, bool step) {
  std::string d;
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string px = Px(x(points[i].first)), py = Px(y(points[i].second));
    if (i == 0) {
      d = "M" + px + "," + py;
    } else if (step) {
      d += " H" + px + " V" + py;
    } else {
      d += " L" + px + "," + py;
    }
  }
  return d;
}

enum class XyKind { kLine, kScatter };

// Named series, right of the plot: a line or dot swatch and the (cut) name.
std::string Legend(const std::vector<Series>& series, XyKind kind, double x0, double top, int max_chars) {
  std::string out = "<g class=\"legend\">\n";
  int row = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (series[i].name.empty()) continue;
    const double y = top + 8 + 18 * row++;
    if (kind == XyKind::kLine && series[i].line) {
      out += "<line x1=\"" + Px(x0) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(x0 + 20) + "\" y2=\"" + Px(y) +
             "\" stroke=\"" + SeriesColor(i) + "\" stroke-width=\"2\"/>\n";
    } else {
      out += Circle(x0 + 10, y, 3.5, SeriesColor(i));
    }
    out += Text(x0 + 26, y + 4, Truncate(series[i].name, max_chars));
  }
  return out + "</g>\n";
}

std::string XyChart(const ChartOptions& options, const std::vector<Series>& series, XyKind kind, bool diagonal) {
  const int width = std::max(options.width, kMinWidth), height = std::max(options.height, kMinHeight);
  std::vector<Points> points;
  Range x_data{INFINITY, -INFINITY}, y_data{INFINITY, -INFINITY};
  int named = 0, longest_name = 0;
  for (const Series& s : series) {
    points.push_back(DrawablePoints(s, options.log_x, options.log_y));
    for (const auto& [x, y] : points.back()) {
      x_data = {std::min(x_data.lo, x), std::max(x_data.hi, x)};
      y_data = {std::min(y_data.lo, y), std::max(y_data.hi, y)};
    }
    if (!s.name.empty()) {
      ++named;
      longest_name = std::max(longest_name, CharCount(s.name));
    }
  }
  if (x_data.lo > x_data.hi) return NoDataDocument(options, width, height);
  for (double v : options.y_include) {
    if (std::isfinite(v) && (!options.log_y || v > 0)) y_data = {std::min(y_data.lo, v), std::max(y_data.hi, v)};
  }

  double right_margin = kMarginRight, legend_width = 0;
  if (named > 1) {
    legend_width = std::min(36 + kCharWidth * longest_name, width / 4.0);
    right_margin += legend_width;
  }
  const Frame frame{kMarginLeft, kMarginTop, width - right_margin, static_cast<double>(height - kMarginBottom)};
  const Scale x(PaddedDomain(x_data, options.log_x), frame.left, frame.right, options.log_x);
  const Scale y(PaddedDomain(y_data, options.log_y), frame.bottom, frame.top, options.log_y);

  std::string out = BeginDocument(options, width, height);
  out += XAxis(frame, x, TicksInside(x, TickBudget(frame.width(), 64)), options.x_label, height);
  out += YAxis(frame, y, TicksInside(y, TickBudget(frame.height(), 45)), options.y_label);

  if (diagonal) {
    const double lo = std::max(x.domain().lo, y.domain().lo), hi = std::min(x.domain().hi, y.domain().hi);
    if (lo < hi) {
      // y = x is straight unless exactly one axis is logarithmic; then sample it.
      const int segments = options.log_x == options.log_y ? 1 : 32;
      const bool geometric = options.log_x || options.log_y;
      Points line;
      for (int i = 0; i <= segments; ++i) {
        const double f = static_cast<double>(i) / segments;
        const double v = geometric ? lo * std::pow(hi / lo, f) : lo + f * (hi - lo);
        line.emplace_back(v, v);
      }
      out += "<path class=\"diagonal\" d=\"" + PathData(line, x, y, false) +
             "\" fill=\"none\" stroke=\"#999999\" stroke-dasharray=\"4 3\"/>\n";
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const Points& p = points[i];
    if (p.empty()) continue;
    const char* color = SeriesColor(i);
    out += "<g class=\"series\">\n";
    if (kind == XyKind::kScatter) {
      for (const auto& [px, py] : p) out += Circle(x(px), y(py), 3, color, "fill-opacity=\"0.75\"");
    } else {
      if (p.size() > 1 && series[i].line) {
        out += "<path d=\"" + PathData(p, x, y, series[i].step) + "\" fill=\"none\" stroke=\"" + color +
               "\" stroke-width=\"1.5\" stroke-linejoin=\"round\"/>\n";
      }
      if (series[i].markers || !series[i].line || p.size() == 1) {
        for (const auto& [px, py] : p) out += Circle(x(px), y(py), 2.5, color);
      }
    }
    out += "</g>\n";
  }
  if (named > 1) {
    const int max_chars = static_cast<int>((legend_width - 36) / kCharWidth);
    out += Legend(series, kind, frame.right + 12, frame.top, max_chars);
  }
  return out + "</svg>\n";
}

}  // namespace

std::string LineChart(const ChartOptions& options, const std::vector<Series>& series) {
  return XyChart(options, series, XyKind::kLine, /*diagonal=*/false);
}

std::string ScatterChart(const ChartOptions& options, const std::vector<Series>& series, bool diagonal) {
  return XyChart(options, series, XyKind::kScatter, diagonal);
}

std::string BarChart(const ChartOptions& options, const std::vector<Bar>& bars) {
  const int width = std::max(options.width, kMinWidth), height = std::max(options.height, kMinHeight);
  if (bars.empty()) return NoDataDocument(options, width, height);

  double largest = 0;
  int longest_label = 0, longest_note = 0;
  for (const Bar& bar : bars) {
    if (std::isfinite(bar.value)) largest = std::max(largest, bar.value);
    longest_label = std::max(longest_label, CharCount(bar.label));
    longest_note = std::max(longest_note, CharCount(bar.note));
  }
  const double left = std::clamp(12 + kCharWidth * longest_label, double{kMarginLeft}, 0.4 * width);
  double right = kMarginRight;
  if (longest_note > 0) right = std::min(right + 8 + kCharWidth * longest_note, 0.3 * width);
  const Frame frame{left, kMarginTop, width - right, static_cast<double>(height - kMarginBottom)};
  const int label_chars = static_cast<int>((left - 12) / kCharWidth);
  const int note_chars = static_cast<int>((right - 8) / kCharWidth);

  // All values zero or negative: an axis from 0 to 1 and empty bars.
  const Scale x(Range{0, largest > 0 ? largest : 1}, frame.left, frame.right, /*log=*/false);
  std::string out = BeginDocument(options, width, height);
  out += XAxis(frame, x, TicksInside(x, TickBudget(frame.width(), 64)), options.x_label, height);

  const double row = frame.height() / bars.size();
  const double bar_height = 0.7 * row;
  out += "<g class=\"bars\">\n";
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& bar = bars[i];
    const double top = frame.top + row * i, middle = top + row / 2;
    const double length = std::isfinite(bar.value) && bar.value > 0 ? x(bar.value) - frame.left : 0;
    out += "<rect class=\"bar\" x=\"" + Px(frame.left) + "\" y=\"" + Px(top + (row - bar_height) / 2) + "\" width=\"" +
           Px(length) + "\" height=\"" + Px(bar_height) + "\" fill=\"" + SeriesColor(0) + "\"/>\n";
    const std::string label = Truncate(bar.label, label_chars);
    if (label != bar.label) {
      out += "<text x=\"" + Px(frame.left - 6) + "\" y=\"" + Px(middle + 4) + "\" text-anchor=\"end\"><title>" +
             EscapeXml(bar.label) + "</title>" + EscapeXml(label) + "</text>\n";
    } else {
      out += Text(frame.left - 6, middle + 4, label, "text-anchor=\"end\"");
    }
    if (!bar.note.empty()) out += Text(frame.left + length + 4, middle + 4, Truncate(bar.note, note_chars));
  }
  out += "</g>\n";
  return out + "</svg>\n";
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (lo > hi) std::swap(lo, hi);
  if (TooNarrow(lo, hi)) {
    const double mid = 0.5 * lo + 0.5 * hi, half = HalfWidthAround(mid);
    lo = mid - half;
    hi = mid + half;
  }
  const double span = hi - lo;
  if (!std::isfinite(span)) return {};
  // Two consecutive multiples of a step cannot cover a range with 0 strictly inside.
  const int most = std::max(max_ticks, lo < 0 && hi > 0 ? 3 : 2);
  // Steps m * 10^e, smallest first; ticks are n * m * 10^e for integer n, computed
  // as (n * m) / 10^-e for negative e so that e.g. 0.3 is the double nearest 0.3.
  for (int e = static_cast<int>(std::floor(std::log10(span / (most - 1)))); e < 400; ++e) {
    const double power = std::pow(10.0, std::abs(e));
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = e >= 0 ? m * power : m / power;
      const double first = std::floor(lo / step), last = std::ceil(hi / step);
      if (last - first + 1 > most) continue;
      std::vector<double> ticks;
      for (double n = first; n <= last; ++n) ticks.push_back((e >= 0 ? n * m * power : n * m / power) + 0.0);
      return ticks;
    }
  }
  return {lo, hi};  // unreachable: a step of 10^(e+1) > span always fits
}

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
    }
  }
  return out;
}

std::string FormatNumber(double value, int significant_digits) {
  if (!std::isfinite(value)) return "";
  if (value == 0) return "0";
  const int digits = std::clamp(significant_digits, 1, 17);
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific, digits - 1);
  const std::string scientific(buffer, result.ptr);  // "-1.23e-05"
  const size_t e_pos = scientific.find('e');
  const bool negative = scientific[0] == '-';
  const int exponent = std::atoi(scientific.c_str() + e_pos + 1);
  std::string mantissa;  // the significant digits, without sign or point
  for (size_t i = negative ? 1 : 0; i < e_pos; ++i) {
    if (scientific[i] != '.') mantissa += scientific[i];
  }
  mantissa.erase(mantissa.find_last_not_of('0') + 1);  // the first digit is never 0

  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent <= 6) {
    const int integer_digits = exponent + 1;
    if (integer_digits <= 0) {
      out += "0." + std::string(-integer_digits, '0') + mantissa;
    } else if (integer_digits >= static_cast<int>(mantissa.size())) {
      out += mantissa + std::string(integer_digits - mantissa.size(), '0');
    } else {
      out += mantissa.substr(0, integer_digits) + "." + mantissa.substr(integer_digits);
    }
  } else {
    out += mantissa.substr(0, 1);
    if (mantissa.size() > 1) out += "." + mantissa.substr(1);
    out += "e" + std::to_string(exponent);
  }
  return out;
}

}  // namespace kiln::client::svg
