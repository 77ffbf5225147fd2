// What a person reads of a TuningReport: the curves and comparisons derived
// from its measurements, a terminal summary, and a standalone HTML page with
// SVG charts (client/svg_chart.h).
#pragma once

#include <string>
#include <vector>

#include "kiln/v1/report.pb.h"

namespace kiln::client {

// A latency for people: "12.34 us" below a millisecond, else "1.234 ms"; "-"
// when not positive (never measured).
std::string FormatLatency(double ms);

// y after each x: a best-so-far or model-latency curve.
struct Curve {
  std::vector<double> x, y;
};

// A workload's best valid median after each of its trials (a trial is the
// first measurement of a config; re-measurements are not trials). x counts
// trials from 1; a failed trial keeps the best so far; no point before the
// first valid one.
Curve BestSoFar(const kiln::v1::WorkloadTuning& workload);

// The model's estimated latency, sum over its measured workloads of count x
// best median so far, after each trial of any of them in the order measured
// (created time). The curve starts once every workload that has a valid
// record has one; workloads with none are left out (MeasuredWorkloads says
// how many are in).
Curve ModelCurve(const kiln::v1::TuningReport& report);
int MeasuredWorkloads(const kiln::v1::TuningReport& report);

// Each trial the search predicted and that measured valid: the cost model's
// score, and the measured relative speed (workload best / trial median, 1 =
// the best), as the model is trained to predict.
struct Prediction {
  double predicted = 0;
  double measured = 0;
};
std::vector<Prediction> Predictions(const kiln::v1::WorkloadTuning& workload);

// Of the pairs of predictions of one workload whose measured speeds differ
// by more than 2%, the share the predictions order the same way (0.5 =
// chance). Summed over every workload of the report; pairs = 0 when none.
struct RankAccuracy {
  double accuracy = 0;
  int pairs = 0;
};
RankAccuracy PredictionAccuracy(const kiln::v1::TuningReport& report);

// The terminal summary: one line per workload (trials, default, best, gain,
// share of the model) and the model's totals.
std::string ReportText(const kiln::v1::TuningReport& report);

// A standalone HTML page: totals, the model's latency against trials, where
// the trials went, predicted against measured, and each workload's best so
// far (the ones that weigh most in the model first), then a table of all.
std::string ReportHtml(const kiln::v1::TuningReport& report);

}  // namespace kiln::client
