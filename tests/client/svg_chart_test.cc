// SVG charts: nice ticks, number formatting and escaping, pixel positions from the
// documented margins, log axes, step paths, empty input, bars, and well-formedness.
#include "client/svg_chart.h"

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::client::svg {
namespace {

using ::testing::DoubleEq;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pointwise;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A small XML checker: one root element <svg>, opening and closing tags balance
// (self-closing tags included), attribute quotes pair up, and every '&' starts
// one of the five predefined entities.
::testing::AssertionResult WellFormed(const std::string& xml) {
  std::vector<std::string> open;
  bool root_seen = false;
  for (size_t i = 0; i < xml.size(); ++i) {
    if (xml[i] == '&') {
      bool entity = false;
      for (const char* name : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
        entity = entity || xml.compare(i, std::string(name).size(), name) == 0;
      }
      if (!entity) return ::testing::AssertionFailure() << "bare '&' at " << i;
      continue;
    }
    if (xml[i] == '>') return ::testing::AssertionFailure() << "'>' outside a tag at " << i;
    if (xml[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) {
        return ::testing::AssertionFailure() << "text outside the root at " << i;
      }
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unterminated tag at " << i;
    const std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return ::testing::AssertionFailure() << "'<' inside tag " << tag;
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return ::testing::AssertionFailure() << "quotes: " << tag;
    if (tag.empty()) return ::testing::AssertionFailure() << "empty tag at " << i;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return ::testing::AssertionFailure()
               << "</" << name << "> closes <" << (open.empty() ? "" : open.back()) << ">";
      }
      open.pop_back();
    } else {
      const std::string name = tag.substr(0, tag.find_first_of(" /"));
      if (open.empty()) {
        if (root_seen) return ::testing::AssertionFailure() << "second root element <" << name << ">";
        if (name != "svg") return ::testing::AssertionFailure() << "root is <" << name << ">";
        root_seen = true;
      }
      if (tag.back() != '/') open.push_back(name);
    }
    i = end;
  }
  if (!root_seen) return ::testing::AssertionFailure() << "no root element";
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> is never closed";
  return ::testing::AssertionSuccess();
}

// Every chart in these tests: well-formed, a standalone SVG with a <title>, and
// no NaN or infinity printed anywhere (no test input has such text in it).
void ExpectValidChart(const std::string& svg) {
  EXPECT_TRUE(WellFormed(svg)) << svg;
  EXPECT_THAT(svg, ::testing::StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\" "));
  EXPECT_THAT(svg, HasSubstr("<title>"));
  std::string lower = svg;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_THAT(lower, Not(HasSubstr("nan"))) << svg;
  EXPECT_THAT(lower, Not(HasSubstr("inf"))) << svg;
}

// The d attributes of the series paths (<path d=...>; the diagonal has a class first).
std::vector<std::string> SeriesPaths(const std::string& svg) {
  std::vector<std::string> paths;
  const std::regex path("<path d=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator(); ++it) {
    paths.push_back((*it)[1]);
  }
  return paths;
}

std::vector<std::string> BarWidths(const std::string& svg) {
  std::vector<std::string> widths;
  const std::regex bar("<rect class=\"bar\" [^>]*width=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator(); ++it) {
    widths.push_back((*it)[1]);
  }
  return widths;
}

int Count(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

TEST(SvgChartTest, WellFormedCheckerRejectsBrokenXml) {
  EXPECT_TRUE(WellFormed("<svg a=\"1\"><g><line/></g><text>x &amp; y</text></svg>\n"));
  EXPECT_FALSE(WellFormed("<svg><g></svg>"));
  EXPECT_FALSE(WellFormed("<svg><g></text></g></svg>"));
  EXPECT_FALSE(WellFormed("<svg><text>a & b</text></svg>"));
  EXPECT_FALSE(WellFormed("<svg><text>a<b</text></svg>"));
  EXPECT_FALSE(WellFormed("<svg a=\"x></svg>"));
  EXPECT_FALSE(WellFormed("<svg></svg><svg></svg>"));
  EXPECT_FALSE(WellFormed("<g></g>"));
}

TEST(SvgChartTest, NiceTicksZeroToOne) {
  EXPECT_THAT(NiceTicks(0, 1, 6), Pointwise(DoubleEq(), std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_THAT(NiceTicks(0, 1, 5), Pointwise(DoubleEq(), std::vector<double>{0, 0.5, 1}));
  const std::vector<double> tenths = NiceTicks(0, 1, 11);
  ASSERT_EQ(tenths.size(), 11u);
  EXPECT_EQ(tenths[3], 0.3);  // exactly the double nearest 0.3, not 3 * 0.1
  EXPECT_EQ(tenths[7], 0.7);
}

TEST(SvgChartTest, NiceTicksZeroTo97) {
  EXPECT_THAT(NiceTicks(0, 97, 6), Pointwise(DoubleEq(), std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_THAT(NiceTicks(0, 97, 10), Pointwise(DoubleEq(), std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_THAT(NiceTicks(0, 97, 11),
              Pointwise(DoubleEq(), std::vector<double>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}));
}

TEST(SvgChartTest, NiceTicksNegativeRanges) {
  EXPECT_THAT(NiceTicks(-7, -3, 5), Pointwise(DoubleEq(), std::vector<double>{-7, -6, -5, -4, -3}));
  EXPECT_THAT(NiceTicks(-3, 8, 5), Pointwise(DoubleEq(), std::vector<double>{-5, 0, 5, 10}));
  EXPECT_THAT(NiceTicks(-250, -10, 4), Pointwise(DoubleEq(), std::vector<double>{-300, -200, -100, 0}));
  // Two multiples of a step cannot cover a range around 0; three are the least.
  EXPECT_THAT(NiceTicks(-1, 1, 2), Pointwise(DoubleEq(), std::vector<double>{-1, 0, 1}));
}

TEST(SvgChartTest, NiceTicksEqualEnds) {
  EXPECT_THAT(NiceTicks(5, 5, 5), Pointwise(DoubleEq(), std::vector<double>{4.5, 5, 5.5}));
  EXPECT_THAT(NiceTicks(0, 0, 5), Pointwise(DoubleEq(), std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_THAT(NiceTicks(-2, -2, 5), Pointwise(DoubleEq(), std::vector<double>{-2.2, -2.1, -2, -1.9, -1.8}));
}

TEST(SvgChartTest, NiceTicksTinyRanges) {
  EXPECT_THAT(NiceTicks(1e-9, 3e-9, 5), Pointwise(DoubleEq(), std::vector<double>{1e-9, 1.5e-9, 2e-9, 2.5e-9, 3e-9}));
  EXPECT_THAT(NiceTicks(0.001, 0.0012, 3), Pointwise(DoubleEq(), std::vector<double>{0.001, 0.0011, 0.0012}));
  // Narrower than double precision can tick: treated as the single value 1 (the
  // midpoint rounds to 1), widened to [0.9, 1.1].
  EXPECT_THAT(NiceTicks(1, std::nextafter(1.0, 2.0), 5),
              Pointwise(DoubleEq(), std::vector<double>{0.9, 0.95, 1, 1.05, 1.1}));
  // The midpoint of [1, 1 + 1e-14] is 1 + 5e-15: 1.1 + 5.5e-15 needs a tick above 1.1.
  EXPECT_THAT(NiceTicks(1, 1 + 1e-14, 5), Pointwise(DoubleEq(), std::vector<double>{0.9, 1, 1.1, 1.2}));
}

TEST(SvgChartTest, NiceTicksSwapsClampsAndRejectsNonFinite) {
  EXPECT_THAT(NiceTicks(10, 0, 3), Pointwise(DoubleEq(), std::vector<double>{0, 5, 10}));
  EXPECT_THAT(NiceTicks(0, 10, 1), Pointwise(DoubleEq(), std::vector<double>{0, 10}));
  EXPECT_THAT(NiceTicks(0, 10, -4), Pointwise(DoubleEq(), std::vector<double>{0, 10}));
  EXPECT_TRUE(NiceTicks(kNaN, 1, 5).empty());
  EXPECT_TRUE(NiceTicks(0, kInf, 5).empty());
}

TEST(SvgChartTest, NiceTicksAlwaysCoverTheRangeWithinTheBudget) {
  const std::vector<std::pair<double, double>> ranges = {
      {0, 1}, {0.3, 0.31}, {-17, 1234}, {1e6, 1e6 + 3}, {-0.004, -0.0001}, {2.5, 97.25}, {-1e12, 1e15}, {7, 7.5}};
  for (const auto& [lo, hi] : ranges) {
    for (int max_ticks = 2; max_ticks <= 12; ++max_ticks) {
      const std::vector<double> ticks = NiceTicks(lo, hi, max_ticks);
      SCOPED_TRACE(testing::Message() << "[" << lo << ", " << hi << "] max " << max_ticks);
      ASSERT_GE(ticks.size(), 2u);
      EXPECT_LE(ticks.size(), static_cast<size_t>(std::max(max_ticks, lo < 0 && hi > 0 ? 3 : 2)));
      EXPECT_LE(ticks.front(), lo);
      EXPECT_GE(ticks.back(), hi);
      EXPECT_TRUE(std::is_sorted(ticks.begin(), ticks.end()));
    }
  }
}

TEST(SvgChartTest, EscapeXml) {
  EXPECT_EQ(EscapeXml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(EscapeXml("plain text, µs"), "plain text, µs");
  EXPECT_EQ(EscapeXml("x\x01y\tz\n"), "xy\tz\n");  // XML 1.0 forbids most control characters
  EXPECT_EQ(EscapeXml(""), "");
}

TEST(SvgChartTest, FormatNumber) {
  EXPECT_EQ(FormatNumber(1200), "1200");
  EXPECT_EQ(FormatNumber(0.25), "0.25");
  EXPECT_EQ(FormatNumber(0.000123), "0.000123");
  EXPECT_EQ(FormatNumber(0.0000123), "1.23e-5");
  EXPECT_EQ(FormatNumber(1234567), "1230000");
  EXPECT_EQ(FormatNumber(12345678), "1.23e7");
  EXPECT_EQ(FormatNumber(0.1 + 0.2), "0.3");
  EXPECT_EQ(FormatNumber(9.996), "10");
  EXPECT_EQ(FormatNumber(-3), "-3");
  EXPECT_EQ(FormatNumber(-0.0), "0");
  EXPECT_EQ(FormatNumber(2.0 / 3), "0.667");
  EXPECT_EQ(FormatNumber(1.0002, 5), "1.0002");
  EXPECT_EQ(FormatNumber(kNaN), "");
  EXPECT_EQ(FormatNumber(-kInf), "");
}

TEST(SvgChartTest, LineChartMapsPointsFromDocumentedMargins) {
  ChartOptions options;
  options.title = "Latency";
  options.x_label = "trial";
  options.y_label = "ms";
  const std::string svg = LineChart(options, {{.name = "best", .x = {0, 5, 10}, .y = {0, 50, 100}}});
  ExpectValidChart(svg);
  EXPECT_THAT(svg, HasSubstr("width=\"640\" height=\"360\" viewBox=\"0 0 640 360\""));
  EXPECT_THAT(svg, HasSubstr("<title>Latency</title>"));
  // Plot area x 72..624, y 36..312. x domain [-0.5, 10.5] and y domain [-5, 105]
  // (data range widened by 5% on each side): x = 0 -> 72 + 0.5 / 11 * 552 = 97.1,
  // y = 0 -> 312 - 5 / 110 * 276 = 299.5; x = 10 -> 598.9, y = 100 -> 48.5.
  EXPECT_THAT(SeriesPaths(svg), testing::ElementsAre("M97.1,299.5 L348.0,174.0 L598.9,48.5"));
  // Ticks at multiples of 2 on x and 20 on y, labelled and placed on the scale.
  EXPECT_THAT(svg, HasSubstr("<text x=\"97.1\" y=\"330.0\" text-anchor=\"middle\" font-size=\"11\">0</text>"));
  EXPECT_THAT(svg, HasSubstr(">10</text>"));
  EXPECT_THAT(svg, HasSubstr("<text x=\"64.0\" y=\"52.5\" text-anchor=\"end\" font-size=\"11\">100</text>"));
  EXPECT_THAT(svg, HasSubstr(">trial</text>"));
  EXPECT_THAT(svg, HasSubstr("rotate(-90)\" text-anchor=\"middle\">ms</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("<circle")));           // no markers unless asked
  EXPECT_THAT(svg, Not(HasSubstr("class=\"legend\"")));  // a single named series needs none
}

TEST(SvgChartTest, LineChartMarkersAndSinglePoints) {
  const std::string markers = LineChart({}, {{.x = {0, 1, 2}, .y = {1, 2, 3}, .markers = true}});
  ExpectValidChart(markers);
  EXPECT_EQ(Count(markers, "<circle"), 3);
  const std::string single = LineChart({}, {{.x = {4}, .y = {2}}});
  ExpectValidChart(single);
  EXPECT_TRUE(SeriesPaths(single).empty());
  // A single value is widened to +-10%: the point sits in the middle of the plot.
  EXPECT_THAT(single, HasSubstr("<circle cx=\"348.0\" cy=\"174.0\""));
  // line = false: the points alone.
  const std::string points = LineChart({}, {{.x = {0, 1, 2}, .y = {1, 2, 3}, .line = false}});
  ExpectValidChart(points);
  EXPECT_EQ(Count(points, "<circle"), 3);
  EXPECT_TRUE(SeriesPaths(points).empty());
}

TEST(SvgChartTest, TheYAxisCoversTheValuesItMustInclude) {
  ChartOptions options;
  options.y_include = {0, std::nan("")};
  const std::string svg = LineChart(options, {{.x = {0, 1}, .y = {9, 10}}});
  ExpectValidChart(svg);
  // y in [0, 10] widened by 5% to [-0.5, 10.5] over the 276 pixels from 312 up:
  // 9 at 312 - 276 * 9.5 / 11, 10 at 312 - 276 * 10.5 / 11.
  EXPECT_THAT(SeriesPaths(svg), testing::ElementsAre("M97.1,73.6 L598.9,48.5"));
  EXPECT_THAT(svg, HasSubstr(">0</text>"));
}

TEST(SvgChartTest, LogAxesSkipNonPositiveValues) {
  ChartOptions options;
  options.log_y = true;
  const std::string svg = LineChart(options, {{.x = {1, 2, 3, 4, 5}, .y = {0, -1, 1, 10, 100}}});
  ExpectValidChart(svg);
  // Kept: (3, 1), (4, 10), (5, 100); log10 y in [0, 2] widened to [-0.1, 2.1].
  EXPECT_THAT(SeriesPaths(svg), testing::ElementsAre("M97.1,299.5 L348.0,174.0 L598.9,48.5"));
  EXPECT_THAT(svg, HasSubstr(">1</text>"));
  EXPECT_THAT(svg, HasSubstr(">10</text>"));
  EXPECT_THAT(svg, HasSubstr(">100</text>"));

  ChartOptions log_x;
  log_x.log_x = true;
  const std::string x_svg = LineChart(log_x, {{.x = {-1, 0, 10, 100}, .y = {5, 6, 7, 8}}});
  ExpectValidChart(x_svg);
  const std::vector<std::string> paths = SeriesPaths(x_svg);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(Count(paths[0], " L"), 1);
  EXPECT_THAT(x_svg, HasSubstr(">100</text>"));  // one decade: 2 and 5 times the powers too
  EXPECT_THAT(x_svg, HasSubstr(">20</text>"));

  const std::string nothing_positive = LineChart(options, {{.x = {1, 2}, .y = {0, -3}}});
  ExpectValidChart(nothing_positive);
  EXPECT_THAT(nothing_positive, HasSubstr(">no data</text>"));
}

TEST(SvgChartTest, StepSeriesProduceStepPath) {
  const std::string svg = LineChart({}, {{.x = {0, 1, 2}, .y = {3, 2, 1}, .step = true}});
  ExpectValidChart(svg);
  // Each value holds until the next x, then drops.
  EXPECT_THAT(SeriesPaths(svg), testing::ElementsAre("M97.1,48.5 H348.0 V174.0 H598.9 V299.5"));
}

TEST(SvgChartTest, EmptyAndNanOnlyInputGiveNoData) {
  ChartOptions options;
  options.title = "Empty";
  const std::vector<std::string> charts = {
      LineChart(options, {}),
      LineChart(options, {{.name = "n", .x = {kNaN, 1, kInf}, .y = {1, kNaN, 2}}}),
      LineChart(options, {{.name = "mismatch", .x = {1, 2}, .y = {}}}),
      ScatterChart(options, {{.x = {kInf}, .y = {-kInf}}}, /*diagonal=*/true),
      BarChart(options, {}),
  };
  for (const std::string& svg : charts) {
    ExpectValidChart(svg);
    EXPECT_THAT(svg, HasSubstr("<title>Empty</title>"));
    EXPECT_THAT(svg, HasSubstr(">no data</text>"));
    EXPECT_THAT(svg, Not(HasSubstr("<path")));
  }
  const std::string untitled = LineChart({}, {});
  ExpectValidChart(untitled);
  EXPECT_THAT(untitled, HasSubstr("<title>Chart</title>"));
}

TEST(SvgChartTest, NonFinitePointsAreSkippedAndExtremesStayFinite) {
  const std::string svg = LineChart({}, {{.x = {0, kNaN, 10, 20}, .y = {0, 5, kInf, 100}}});
  ExpectValidChart(svg);
  const std::vector<std::string> paths = SeriesPaths(svg);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(Count(paths[0], " L"), 1);

  ChartOptions tiny;
  tiny.width = 0;
  tiny.height = -5;
  const std::string extremes = ScatterChart(tiny, {{.x = {-1e308, 1e308, 1e-300}, .y = {1e300, -1e300, 0}}}, true);
  ExpectValidChart(extremes);
  EXPECT_THAT(extremes, HasSubstr("width=\"160\" height=\"100\""));
  EXPECT_EQ(Count(extremes, "<circle"), 3);
}

TEST(SvgChartTest, BarWidthsProportionalToValues) {
  ChartOptions options;
  options.title = "Time per kernel";
  options.x_label = "ms";
  const std::string svg = BarChart(options, {{"a", 1}, {"b", 2}, {"c", 4}, {"d", -3}, {"e", kNaN}});
  ExpectValidChart(svg);
  // Plot x 72..624: the largest bar spans the 552 pixels, the x axis starts at 0.
  EXPECT_THAT(BarWidths(svg), testing::ElementsAre("138.0", "276.0", "552.0", "0.0", "0.0"));
  EXPECT_THAT(svg, HasSubstr("<text x=\"72.0\" y=\"330.0\" text-anchor=\"middle\" font-size=\"11\">0</text>"));
  EXPECT_THAT(svg, HasSubstr(">e</text>"));  // a non-finite value still has its row

  const std::string noted = BarChart({}, {{"conv <3x3>", 2, "<1 ms"}, {"matmul", 1, "fast & \"good\""}});
  ExpectValidChart(noted);
  EXPECT_THAT(noted, HasSubstr(">conv &lt;3x3&gt;</text>"));
  EXPECT_THAT(noted, HasSubstr(">&lt;1 ms</text>"));
  EXPECT_THAT(noted, HasSubstr(">fast &amp; &quot;good&quot;</text>"));
  const std::vector<std::string> widths = BarWidths(noted);
  ASSERT_EQ(widths.size(), 2u);
  EXPECT_NEAR(std::stod(widths[0]), 2 * std::stod(widths[1]), 0.1);
}

TEST(SvgChartTest, LongBarLabelsAreCutWithFullTextAsTooltip) {
  const std::string label(200, 'k');
  const std::string svg = BarChart({}, {{label, 1}});
  ExpectValidChart(svg);
  EXPECT_THAT(svg, HasSubstr("<title>" + label + "</title>"));
  EXPECT_THAT(svg, HasSubstr("k\xE2\x80\xA6</text>"));
}

TEST(SvgChartTest, SeriesNamesAndTitlesAreEscaped) {
  ChartOptions options;
  options.title = "x < y & z";
  options.x_label = "it's";
  const std::string svg = LineChart(
      options, {{.name = "a<b & \"c\"", .x = {0, 1}, .y = {0, 1}}, {.name = "plain", .x = {0, 1}, .y = {1, 0}}});
  ExpectValidChart(svg);
  EXPECT_THAT(svg, HasSubstr("<title>x &lt; y &amp; z</title>"));
  EXPECT_THAT(svg, HasSubstr(">a&lt;b &amp; &quot;c&quot;</text>"));
  EXPECT_THAT(svg, HasSubstr(">it&apos;s</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("a<b")));
}

TEST(SvgChartTest, LegendAndDistinctColoursForSeveralNamedSeries) {
  const std::string svg = LineChart({}, {{.name = "one", .x = {0, 1}, .y = {0, 1}},
                                         {.name = "two", .x = {0, 1}, .y = {1, 2}},
                                         {.x = {0, 1}, .y = {2, 3}},
                                         {.name = "four", .x = {0, 1}, .y = {3, 4}}});
  ExpectValidChart(svg);
  EXPECT_THAT(svg, HasSubstr("class=\"legend\""));
  EXPECT_THAT(svg, HasSubstr(">one</text>"));
  EXPECT_THAT(svg, HasSubstr(">four</text>"));
  for (const char* colour : {"#0072B2", "#D55E00", "#009E73", "#CC79A7"}) {
    EXPECT_THAT(svg, HasSubstr("stroke=\"" + std::string(colour) + "\" stroke-width=\"1.5\"")) << colour;
  }
  // The legend (36 + 7 px per character of "four") narrows the plot: x = 1 now maps
  // to 72 + 1.05 / 1.1 * (640 - 16 - 64 - 72) = 537.8 (y = 1 of [-0.2, 4.2] to 236.7).
  EXPECT_THAT(SeriesPaths(svg)[0], testing::EndsWith(" L537.8,236.7"));
}

TEST(SvgChartTest, ScatterChartWithDiagonal) {
  ChartOptions options;
  options.title = "Predicted vs measured";
  const std::vector<Series> series = {{.name = "kernels", .x = {1, 2, 3}, .y = {1, 2, 3}}};
  const std::string svg = ScatterChart(options, series, /*diagonal=*/true);
  ExpectValidChart(svg);
  // Both axes span [0.9, 3.1]: y = x runs corner to corner of the plot.
  EXPECT_THAT(svg, HasSubstr("<path class=\"diagonal\" d=\"M72.0,312.0 L624.0,36.0\""));
  EXPECT_EQ(Count(svg, "<circle"), 3);
  EXPECT_THAT(svg, HasSubstr("<circle cx=\"97.1\" cy=\"299.5\""));
  EXPECT_TRUE(SeriesPaths(svg).empty());

  const std::string plain = ScatterChart(options, series, /*diagonal=*/false);
  ExpectValidChart(plain);
  EXPECT_THAT(plain, Not(HasSubstr("diagonal")));

  ChartOptions log_x = options;
  log_x.log_x = true;
  const std::string curved = ScatterChart(log_x, {{.x = {1, 10, 100}, .y = {2, 20, 90}}}, /*diagonal=*/true);
  ExpectValidChart(curved);
  EXPECT_THAT(curved, HasSubstr("class=\"diagonal\""));
}

TEST(SvgChartTest, OutputIsDeterministic) {
  ChartOptions options;
  options.title = "Tuning";
  options.log_y = true;
  const std::vector<Series> series = {{.name = "best", .x = {1, 2, 3}, .y = {0.3, 0.2, 0.1}, .step = true},
                                      {.name = "trial", .x = {1, 2, 3}, .y = {0.3, 0.25, 0.1}, .markers = true}};
  EXPECT_EQ(LineChart(options, series), LineChart(options, series));
  ExpectValidChart(LineChart(options, series));
}

}  // namespace
}  // namespace kiln::client::svg
