// Derived views of a TuningReport, its terminal summary and its HTML page.
#include "client/tuning_report_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "client/svg_chart.h"

namespace kiln::client {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool Valid(const kiln::v1::TuningTrial& t) { return t.error() == "ok" && t.median_ms() > 0; }

// The lowest valid median of the workload's trials; 0 when none.
double BestMedian(const kiln::v1::WorkloadTuning& w) {
  double best = kInf;
  for (const auto& t : w.trials()) {
    if (Valid(t)) best = std::min(best, t.median_ms());
  }
  return std::isfinite(best) ? best : 0;
}

int TrialCount(const kiln::v1::WorkloadTuning& w) {
  int n = 0;
  for (const auto& t : w.trials()) n += t.remeasure() ? 0 : 1;
  return n;
}

// What the workload costs the model: count x its best (else its default).
double Weight(const kiln::v1::WorkloadTuning& w) {
  const double ms = w.best_ms() > 0 ? w.best_ms() : w.default_ms();
  return w.count() * ms;
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", r);
  return buf;
}

std::string Name(const kiln::v1::WorkloadTuning& w) {
  return absl::StrCat(w.op_summary().empty() ? w.kind() : w.op_summary(), " (", w.workload_key().substr(0, 8), ")");
}

// Model totals at the default and at the best, over workloads with both.
struct Totals {
  int trials = 0, remeasures = 0, failed = 0;
  double default_ms = 0, best_ms = 0;
  int compared = 0;  // workloads with a measured default and a best
};

Totals ComputeTotals(const kiln::v1::TuningReport& r) {
  Totals t;
  for (const auto& w : r.workloads()) {
    for (const auto& trial : w.trials()) {
      if (trial.remeasure()) {
        ++t.remeasures;
      } else {
        ++t.trials;
        t.failed += Valid(trial) ? 0 : 1;
      }
    }
    if (w.default_ms() > 0 && w.best_ms() > 0) {
      t.default_ms += w.count() * w.default_ms();
      t.best_ms += w.count() * w.best_ms();
      ++t.compared;
    }
  }
  return t;
}

// Workload indices, heaviest in the model first.
std::vector<int> ByWeight(const kiln::v1::TuningReport& r) {
  std::vector<int> order(r.workloads_size());
  for (int i = 0; i < r.workloads_size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return Weight(r.workloads(a)) > Weight(r.workloads(b)); });
  return order;
}

std::string Title(const kiln::v1::TuningReport& r) {
  if (r.job_id() != 0) return absl::StrCat("tuning job ", r.job_id());
  return r.model_name().empty() ? std::string("model") : r.model_name();
}

}  // namespace

std::string FormatLatency(double ms) {
  if (!(ms > 0)) return "-";
  char buf[32];
  if (ms < 1) {
    std::snprintf(buf, sizeof(buf), "%.2f us", ms * 1000);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  }
  return buf;
}

Curve BestSoFar(const kiln::v1::WorkloadTuning& w) {
  Curve c;
  double best = kInf;
  int n = 0;
  for (const auto& t : w.trials()) {
    if (t.remeasure()) continue;
    ++n;
    if (Valid(t)) best = std::min(best, t.median_ms());
    if (std::isfinite(best)) {
      c.x.push_back(n);
      c.y.push_back(best);
    }
  }
  return c;
}

int MeasuredWorkloads(const kiln::v1::TuningReport& r) {
  int n = 0;
  for (const auto& w : r.workloads()) n += BestMedian(w) > 0 ? 1 : 0;
  return n;
}

Curve ModelCurve(const kiln::v1::TuningReport& r) {
  // Every trial of every workload, in the order measured.
  std::vector<std::tuple<int64_t, int, int>> events;  // created, workload, position
  for (int w = 0; w < r.workloads_size(); ++w) {
    const auto& trials = r.workloads(w).trials();
    for (int i = 0; i < trials.size(); ++i) {
      if (!trials[i].remeasure()) events.emplace_back(trials[i].created_unix_ms(), w, i);
    }
  }
  std::stable_sort(events.begin(), events.end());
  std::vector<double> best(r.workloads_size(), kInf);
  const int measured = MeasuredWorkloads(r);
  int have = 0, n = 0;
  Curve c;
  for (const auto& [created, w, i] : events) {
    ++n;
    const auto& t = r.workloads(w).trials(i);
    if (Valid(t)) {
      if (!std::isfinite(best[w])) ++have;
      best[w] = std::min(best[w], t.median_ms());
    }
    if (have < measured || measured == 0) continue;
    double total = 0;
    for (int k = 0; k < r.workloads_size(); ++k) {
      if (std::isfinite(best[k])) total += r.workloads(k).count() * best[k];
    }
    c.x.push_back(n);
    c.y.push_back(total);
  }
  return c;
}

std::vector<Prediction> Predictions(const kiln::v1::WorkloadTuning& w) {
  std::vector<Prediction> out;
  const double best = BestMedian(w);
  if (best <= 0) return out;
  for (const auto& t : w.trials()) {
    if (t.remeasure() || !t.has_predicted() || !Valid(t) || !std::isfinite(t.predicted())) continue;
    out.push_back(Prediction{t.predicted(), best / t.median_ms()});
  }
  return out;
}

RankAccuracy PredictionAccuracy(const kiln::v1::TuningReport& r) {
  int right = 0, pairs = 0;
  for (const auto& w : r.workloads()) {
    const std::vector<Prediction> p = Predictions(w);
    for (size_t i = 0; i < p.size(); ++i) {
      for (size_t j = i + 1; j < p.size(); ++j) {
        const double dm = p[i].measured - p[j].measured;
        if (std::abs(dm) <= 0.02 * std::max(p[i].measured, p[j].measured)) continue;
        ++pairs;
        right += (dm > 0) == (p[i].predicted - p[j].predicted > 0) ? 1 : 0;
      }
    }
  }
  return RankAccuracy{pairs > 0 ? static_cast<double>(right) / pairs : 0, pairs};
}

std::string ReportText(const kiln::v1::TuningReport& r) {
  const Totals t = ComputeTotals(r);
  std::string out = absl::StrCat(Title(r), " on ", r.target(), ": ", r.workloads_size(), " workloads");
  if (r.job_id() == 0) absl::StrAppend(&out, " (", r.groups(), " groups)");
  absl::StrAppend(&out, ", ", t.trials, " trials (", t.failed, " failed), ", t.remeasures, " re-measurements\n");
  if (r.job_id() != 0) absl::StrAppend(&out, "job ", r.job_state(), ": ", r.job_message(), "\n");
  if (t.compared > 0) {
    absl::StrAppend(&out, "sum of group medians over the ", t.compared, " workloads with a measured default: default ",
                    FormatLatency(t.default_ms), " -> best ", FormatLatency(t.best_ms), " (",
                    Ratio(t.default_ms / t.best_ms), ")\n");
  }
  if (RankAccuracy a = PredictionAccuracy(r); a.pairs > 0) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "cost model: %.2f of %d pairs of trials ordered right (0.5 = chance)\n", a.accuracy,
                  a.pairs);
    out += buf;
  }
  char line[256];
  std::snprintf(line, sizeof(line), "  %-12s %-11s %-28s %5s %6s %5s %10s %10s %6s %6s\n", "workload", "kind", "ops",
                "count", "trials", "space", "default", "best", "gain", "share");
  out += line;
  double total = 0;
  for (const auto& w : r.workloads()) total += Weight(w);
  for (int i : ByWeight(r)) {
    const auto& w = r.workloads(i);
    const std::string gain = w.default_ms() > 0 && w.best_ms() > 0 ? Ratio(w.default_ms() / w.best_ms()) : "-";
    const std::string share =
        total > 0 ? absl::StrCat(static_cast<int>(std::lround(100 * Weight(w) / total)), "%") : "-";
    std::string ops = w.op_summary();
    if (ops.size() > 28) ops = ops.substr(0, 25) + "...";
    std::snprintf(line, sizeof(line), "  %-12s %-11s %-28s %5d %6d %5d %10s %10s %6s %6s\n",
                  w.workload_key().substr(0, 12).c_str(), w.kind().c_str(), ops.c_str(), w.count(), TrialCount(w),
                  w.space_size(), FormatLatency(w.default_ms()).c_str(), FormatLatency(w.best_ms()).c_str(),
                  gain.c_str(), share.c_str());
    out += line;
  }
  return out;
}

std::string ReportHtml(const kiln::v1::TuningReport& r) {
  const Totals t = ComputeTotals(r);
  const std::string title = absl::StrCat("Kiln tuning report: ", Title(r));
  std::string html =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", svg::EscapeXml(title),
                   "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:72em}"
                   "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
                   "td:nth-child(-n+3),th:nth-child(-n+3){text-align:left}.charts svg{margin:0 1em 1em 0}"
                   "code{font-size:90%}</style></head><body>\n<h1>",
                   svg::EscapeXml(title), "</h1>\n<p>Target <code>", svg::EscapeXml(r.target()),
                   "</code>, schedule space ", r.space_version(), ". ", r.workloads_size(), " workloads");
  if (r.job_id() == 0) absl::StrAppend(&html, " in ", r.groups(), " fusion groups");
  absl::StrAppend(&html, "; ", t.trials, " trials (", t.failed, " failed) and ", t.remeasures,
                  " re-measurements of leaders.");
  if (r.job_id() != 0) {
    absl::StrAppend(&html, " Job ", svg::EscapeXml(r.job_state()), ": ", svg::EscapeXml(r.job_message()), ".");
  }
  if (t.compared > 0) {
    absl::StrAppend(&html, " Sum of group medians over the ", t.compared,
                    " workloads with a measured default: ", FormatLatency(t.default_ms), " at the defaults, ",
                    FormatLatency(t.best_ms), " tuned (", Ratio(t.default_ms / t.best_ms), ").");
  }
  absl::StrAppend(&html, "</p>\n<div class=\"charts\">\n");

  // The model's latency as the trials went.
  const Curve model = ModelCurve(r);
  if (r.workloads_size() > 1 && !model.x.empty()) {
    svg::ChartOptions o;
    o.title = absl::StrCat("Model: sum of count x best median, ", MeasuredWorkloads(r), " workloads");
    o.x_label = "trials (all workloads, in the order measured)";
    o.y_label = "ms";
    // From 0: a 0.1% gain is not drawn as a cliff.
    o.y_include = {0};
    svg::Series s;
    s.name = "best so far";
    s.x = model.x;
    s.y = model.y;
    s.step = true;
    absl::StrAppend(&html, svg::LineChart(o, {s}), "\n");
  }

  // Where the trials went.
  {
    std::vector<svg::Bar> bars;
    for (int i : ByWeight(r)) {
      const auto& w = r.workloads(i);
      std::string note = absl::StrCat(TrialCount(w), TrialCount(w) == 1 ? " trial" : " trials");
      if (w.default_ms() > 0 && w.best_ms() > 0) {
        absl::StrAppend(&note, ", ", FormatLatency(w.default_ms()), " -> ", FormatLatency(w.best_ms()));
      }
      if (w.count() > 1) absl::StrAppend(&note, ", x", w.count());
      bars.push_back(svg::Bar{Name(w), static_cast<double>(TrialCount(w)), note});
    }
    svg::ChartOptions o;
    o.title = "Where the trials went (heaviest workload first)";
    o.x_label = "trials";
    o.height = std::max(160, 40 + 18 * static_cast<int>(bars.size()));
    o.width = 900;
    absl::StrAppend(&html, svg::BarChart(o, bars), "\n");
  }

  // Predicted against measured.
  {
    std::vector<svg::Series> series;
    for (int i : ByWeight(r)) {
      const std::vector<Prediction> p = Predictions(r.workloads(i));
      if (p.empty()) continue;
      svg::Series s;
      s.name = series.size() < 8 ? Name(r.workloads(i)) : "";
      for (const Prediction& q : p) {
        s.x.push_back(q.predicted);
        s.y.push_back(q.measured);
      }
      series.push_back(std::move(s));
    }
    if (!series.empty()) {
      const RankAccuracy a = PredictionAccuracy(r);
      char acc[96];
      std::snprintf(acc, sizeof(acc), " (%.2f of %d pairs in order)", a.accuracy, a.pairs);
      svg::ChartOptions o;
      o.title = absl::StrCat("Cost model: predicted vs measured", a.pairs > 0 ? acc : "");
      o.x_label = "predicted score (higher = faster)";
      o.y_label = "measured: best median / median";
      o.width = 820;
      o.height = 420;
      absl::StrAppend(&html, svg::ScatterChart(o, series, /*diagonal=*/true), "\n");
    }
  }

  // Each heavy workload's best so far.
  int drawn = 0;
  for (int i : ByWeight(r)) {
    const auto& w = r.workloads(i);
    const Curve c = BestSoFar(w);
    if (c.x.empty() || drawn >= 12) continue;
    ++drawn;
    svg::ChartOptions o;
    o.title = Name(w);
    o.x_label = "trials";
    o.y_label = "ms";
    o.width = 440;
    o.height = 260;
    if (w.default_ms() > 0) o.y_include = {0, w.default_ms()};
    svg::Series best;
    best.name = "best";
    best.x = c.x;
    best.y = c.y;
    best.step = true;
    svg::Series each;
    each.name = "trial";
    each.markers = true;
    each.line = false;
    int n = 0;
    for (const auto& trial : w.trials()) {
      if (trial.remeasure()) continue;
      ++n;
      if (!Valid(trial)) continue;
      each.x.push_back(n);
      each.y.push_back(trial.median_ms());
    }
    absl::StrAppend(&html, svg::LineChart(o, {best, each}), "\n");
  }
  absl::StrAppend(&html, "</div>\n");

  // Every workload.
  absl::StrAppend(&html,
                  "<h2>Workloads</h2>\n<table><tr><th>workload</th><th>kind</th><th>ops</th><th>count</th>"
                  "<th>trials</th><th>space</th><th>default</th><th>best</th><th>gain</th><th>best config</th></tr>\n");
  for (int i : ByWeight(r)) {
    const auto& w = r.workloads(i);
    absl::StrAppend(&html, "<tr><td><code>", svg::EscapeXml(w.workload_key().substr(0, 12)), "</code></td><td>",
                    svg::EscapeXml(w.kind()), "</td><td>", svg::EscapeXml(w.op_summary()), "</td><td>", w.count(),
                    "</td><td>", TrialCount(w), "</td><td>", w.space_size(), "</td><td>", FormatLatency(w.default_ms()),
                    "</td><td>", FormatLatency(w.best_ms()), "</td><td>",
                    w.default_ms() > 0 && w.best_ms() > 0 ? Ratio(w.default_ms() / w.best_ms()) : "-",
                    "</td><td><code>", svg::EscapeXml(w.best_config()), "</code></td></tr>\n");
  }
  absl::StrAppend(&html, "</table>\n</body></html>\n");
  return html;
}

}  // namespace kiln::client
