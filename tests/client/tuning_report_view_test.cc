// The curves, accuracy and pages derived from a hand-written TuningReport.
#include "client/tuning_report_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

kiln::v1::TuningTrial* AddTrial(kiln::v1::WorkloadTuning* w, const std::string& config, double ms, int64_t created,
                                double predicted = -1, const std::string& error = "ok") {
  kiln::v1::TuningTrial* t = w->add_trials();
  t->set_config(config);
  t->set_median_ms(ms);
  t->set_error(error);
  t->set_created_unix_ms(created);
  if (predicted >= 0) {
    t->set_has_predicted(true);
    t->set_predicted(predicted);
  }
  for (int i = 0; i + 1 < w->trials_size(); ++i) {
    if (w->trials(i).config() == config) t->set_remeasure(true);
  }
  return t;
}

// Two workloads measured interleaved: a conv used twice and a <small & odd> add.
kiln::v1::TuningReport TwoWorkloads() {
  kiln::v1::TuningReport r;
  r.set_model_name("net");
  r.set_target("cpu/x86_64/test");
  r.set_groups(3);
  kiln::v1::WorkloadTuning* conv = r.add_workloads();
  conv->set_workload_key("c0ffee0000000000");
  conv->set_kind("conv");
  conv->set_op_summary("Conv+Relu");
  conv->set_count(2);
  conv->set_default_config("d");
  AddTrial(conv, "d", 4.0, 10, 0.5);
  AddTrial(conv, "x", 3.0, 30, 0.8);
  AddTrial(conv, "y", 0, 40, 0.9, "build_error");
  AddTrial(conv, "z", 2.0, 50, 0.6);
  AddTrial(conv, "z", 2.2, 60);  // a confirmation, not a trial
  conv->set_default_ms(4.0);
  conv->set_best_config("z");
  conv->set_best_ms(2.1);
  kiln::v1::WorkloadTuning* add = r.add_workloads();
  add->set_workload_key("add0000000000000");
  add->set_kind("elementwise");
  add->set_op_summary("<small & odd>");
  add->set_count(1);
  add->set_default_config("e");
  AddTrial(add, "e", 1.0, 20);
  AddTrial(add, "f", 0.5, 35);
  add->set_default_ms(1.0);
  add->set_best_config("f");
  add->set_best_ms(0.5);
  return r;
}

TEST(TuningReportViewTest, BestSoFarCountsTrialsNotConfirmationsAndKeepsTheBestThroughFailures) {
  const kiln::v1::TuningReport r = TwoWorkloads();
  const Curve c = BestSoFar(r.workloads(0));
  EXPECT_THAT(c.x, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(c.y, ElementsAre(4.0, 3.0, 3.0, 2.0));
}

TEST(TuningReportViewTest, TheModelCurveStartsOnceEveryMeasuredWorkloadHasAValidRecord) {
  const kiln::v1::TuningReport r = TwoWorkloads();
  EXPECT_EQ(MeasuredWorkloads(r), 2);
  // In created order: conv d (10), add e (20), conv x (30), add f (35), conv y (40, failed), conv z (50).
  const Curve c = ModelCurve(r);
  EXPECT_THAT(c.x, ElementsAre(2, 3, 4, 5, 6));
  EXPECT_THAT(c.y, ElementsAre(2 * 4.0 + 1.0, 2 * 3.0 + 1.0, 2 * 3.0 + 0.5, 2 * 3.0 + 0.5, 2 * 2.0 + 0.5));
}

TEST(TuningReportViewTest, PredictionsAreComparedWithTheMeasuredRelativeSpeed) {
  const kiln::v1::TuningReport r = TwoWorkloads();
  const std::vector<Prediction> p = Predictions(r.workloads(0));
  ASSERT_EQ(p.size(), 3u);  // the failed trial and the confirmation are left out
  EXPECT_DOUBLE_EQ(p[0].predicted, 0.5);
  EXPECT_DOUBLE_EQ(p[0].measured, 2.0 / 4.0);
  EXPECT_DOUBLE_EQ(p[2].measured, 1.0);
  // Pairs: (d, x) right, (d, z) right, (x, z) wrong: 0.8 > 0.6 predicted, but z is faster.
  const RankAccuracy a = PredictionAccuracy(r);
  EXPECT_EQ(a.pairs, 3);
  EXPECT_NEAR(a.accuracy, 2.0 / 3.0, 1e-9);
  EXPECT_TRUE(Predictions(r.workloads(1)).empty());
}

TEST(TuningReportViewTest, TheTextSummaryListsTheHeaviestWorkloadFirstWithItsGain) {
  const std::string text = ReportText(TwoWorkloads());
  EXPECT_THAT(text, HasSubstr("net on cpu/x86_64/test: 2 workloads (3 groups), 6 trials (1 failed), 1 re-measurements"));
  // Defaults 2 x 4 + 1 = 9 ms; tuned 2 x 2.1 + 0.5 = 4.7 ms.
  EXPECT_THAT(text, HasSubstr("default 9.000 ms -> best 4.700 ms (1.91x)"));
  EXPECT_THAT(text, HasSubstr("0.67 of 3 pairs"));
  const size_t conv = text.find("c0ffee000000"), add = text.find("add000000000");
  ASSERT_NE(conv, std::string::npos);
  ASSERT_NE(add, std::string::npos);
  EXPECT_LT(conv, add);
  EXPECT_THAT(text, HasSubstr("1.90x"));  // 4.0 / 2.1
}

TEST(TuningReportViewTest, TheHtmlPageHasItsChartsAndEscapesNames) {
  const std::string html = ReportHtml(TwoWorkloads());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  int charts = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  // The model curve, where the trials went, predicted vs measured, two workloads' best so far.
  EXPECT_EQ(charts, 5);
  EXPECT_THAT(html, HasSubstr("&lt;small &amp; odd&gt;"));
  EXPECT_EQ(html.find("<small"), std::string::npos);
  EXPECT_THAT(html, HasSubstr("</html>"));
}

TEST(TuningReportViewTest, AnEmptyReportStillGivesAPage) {
  kiln::v1::TuningReport r;
  r.set_job_id(7);
  r.set_job_state("running");
  EXPECT_TRUE(ModelCurve(r).x.empty());
  EXPECT_EQ(PredictionAccuracy(r).pairs, 0);
  EXPECT_THAT(ReportText(r), HasSubstr("tuning job 7"));
  const std::string html = ReportHtml(r);
  EXPECT_THAT(html, HasSubstr("tuning job 7"));
  EXPECT_EQ(html.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace kiln::client
