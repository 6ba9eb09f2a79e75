// Each row's floor in deepinfer-bench's report (autotune/measure/Roofline.h, benchmarks/BenchReport.h):
// bytes at the measured copy bandwidth or FLOPs at the measured mma.sync rate, whichever takes
// longer, named in the JSON with the floor time and the row's fraction of it.
#include <gtest/gtest.h>

#include "BenchReport.h"
#include "llvm/Support/JSON.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

Ceilings ceilings(double copyGBs, double mmaTflops) {
  Ceilings c;
  c.copyGBs = copyGBs;
  c.mmaTflops = mmaTflops;
  return c;
}

TEST(RooflineFloor, TheLongerOfBytesAndFlopsBounds) {
  // 8 MB at 4000 GB/s = 2 us; 0.6 GFLOP at 600 TFLOP/s = 1 us: copy-bound.
  RooflineFloor f = rooflineFloor(ceilings(4000, 600), 8e6, 6e8);
  EXPECT_DOUBLE_EQ(f.copyUs, 2);
  EXPECT_DOUBLE_EQ(f.mmaUs, 1);
  EXPECT_DOUBLE_EQ(f.us(), 2);
  EXPECT_EQ(f.bound(), RooflineFloor::Bound::Copy);
  EXPECT_STREQ(boundName(f.bound()), "copy");
  EXPECT_DOUBLE_EQ(f.fractionOf(8), 0.25);
  // Ten times the FLOPs: 10 us of mma.sync, mma-bound.
  f = rooflineFloor(ceilings(4000, 600), 8e6, 6e9);
  EXPECT_DOUBLE_EQ(f.us(), 10);
  EXPECT_EQ(f.bound(), RooflineFloor::Bound::Mma);
  EXPECT_STREQ(boundName(f.bound()), "mma");
  // No FLOPs (a gather): the bytes bound it.
  EXPECT_EQ(rooflineFloor(ceilings(4000, 600), 8e6, 0).bound(), RooflineFloor::Bound::Copy);
  // A ceiling that was not measured does not count; neither: no floor, no fraction.
  f = rooflineFloor(ceilings(0, 600), 8e6, 6e8);
  EXPECT_DOUBLE_EQ(f.us(), 1);
  EXPECT_EQ(f.bound(), RooflineFloor::Bound::Mma);
  f = rooflineFloor(ceilings(0, 0), 8e6, 6e8);
  EXPECT_EQ(f.bound(), RooflineFloor::Bound::None);
  EXPECT_STREQ(boundName(f.bound()), "");
  EXPECT_DOUBLE_EQ(f.fractionOf(5), 0);
  EXPECT_DOUBLE_EQ(rooflineFloorUs(ceilings(4000, 600), 8e6, 6e9), 10);
}

VariantResult timed(const std::string& kind, double medianUs) {
  VariantResult v;
  v.kind = kind;
  v.target = "h200";
  v.config = "cfg";
  v.timing.samples = 30;
  v.timing.medianUs = v.timing.minUs = v.timing.p90Us = v.timing.maxUs = medianUs;
  return v;
}

CaseReport report(const std::string& op, double bytes, double flops, std::vector<VariantResult> variants) {
  CaseReport c;
  c.spec = {op, "S", {}, 0, 0};
  c.bytes = bytes;
  c.flops = flops;
  c.checked = true;
  c.variants = std::move(variants);
  return c;
}

const llvm::json::Object& at(const llvm::json::Array& a, size_t i) { return *a[i].getAsObject(); }

TEST(BenchReportFloor, EveryRowAndShapeNamesItsFloor) {
  RunInfo run;
  run.ceilings = ceilings(4000, 600);
  std::vector<CaseReport> cases;
  // Copy-bound: floor 2 us; the sm_80 default at 8 us (25%), the local default at 4 us (50%).
  cases.push_back(report("gather_kcache", 8e6, 0, {timed("sm80-default", 8), timed("local-default", 4)}));
  // mma-bound: floor 10 us; the candidate at 20 us (50%) is the tuned one.
  cases.push_back(report("indexer_logits", 8e6, 6e9,
                         {timed("sm80-default", 40), timed("local-default", 25), timed("candidate", 20)}));
  cases[1].variants[2].kernelsPerLaunch = 2;  // e.g. a split plan: scores, then a merge
  const Derived d = derive(cases[0], cases[0].variants[1], run.ceilings);
  EXPECT_DOUBLE_EQ(d.floorUs, 2);
  EXPECT_DOUBLE_EQ(d.rooflineFraction, 0.5);
  EXPECT_DOUBLE_EQ(d.gbs, 2000);

  auto parsed = llvm::json::parse(toJson(run, cases));
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object& o = *parsed->getAsObject();
  const llvm::json::Array& rows = *o.getArray("rows");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(at(rows, 0).getString("roofline_bound"), "copy");
  EXPECT_DOUBLE_EQ(*at(rows, 0).getNumber("roofline_floor_us"), 2);
  EXPECT_DOUBLE_EQ(*at(rows, 0).getNumber("roofline_copy_us"), 2);
  EXPECT_TRUE(at(rows, 0).get("roofline_mma_us")->getAsNull());  // no FLOPs
  EXPECT_DOUBLE_EQ(*at(rows, 0).getNumber("roofline_fraction"), 0.25);
  EXPECT_DOUBLE_EQ(*at(rows, 1).getNumber("roofline_fraction"), 0.5);
  EXPECT_EQ(at(rows, 4).getString("roofline_bound"), "mma");
  EXPECT_DOUBLE_EQ(*at(rows, 4).getNumber("roofline_floor_us"), 10);
  EXPECT_DOUBLE_EQ(*at(rows, 4).getNumber("roofline_copy_us"), 2);
  EXPECT_DOUBLE_EQ(*at(rows, 4).getNumber("roofline_mma_us"), 10);
  EXPECT_DOUBLE_EQ(*at(rows, 4).getNumber("roofline_fraction"), 0.5);
  EXPECT_EQ(at(rows, 4).getBoolean("tuned"), true);
  EXPECT_EQ(*at(rows, 4).getInteger("kernels_per_launch"), 2);
  EXPECT_TRUE(at(rows, 0).get("kernels_per_launch")->getAsNull());  // not recorded

  const llvm::json::Array& summary = *o.getArray("summary");
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(at(summary, 0).getString("roofline_bound"), "copy");
  EXPECT_DOUBLE_EQ(*at(summary, 0).getNumber("roofline_floor_us"), 2);
  EXPECT_DOUBLE_EQ(*at(summary, 0).getNumber("sm80_default_roofline_fraction"), 0.25);
  EXPECT_DOUBLE_EQ(*at(summary, 0).getNumber("local_default_roofline_fraction"), 0.5);
  EXPECT_TRUE(at(summary, 0).get("tuned_roofline_fraction")->getAsNull());  // no candidates (--quick)
  EXPECT_EQ(at(summary, 1).getString("roofline_bound"), "mma");
  EXPECT_DOUBLE_EQ(*at(summary, 1).getNumber("tuned_roofline_fraction"), 0.5);
  EXPECT_DOUBLE_EQ(*at(summary, 1).getNumber("local_default_roofline_fraction"), 0.4);
}

TEST(BenchReportFloor, TheTableShowsFloorAndFraction) {
  RunInfo run;
  run.ceilings = ceilings(4000, 600);
  std::vector<CaseReport> cases;
  cases.push_back(report("gather_kcache", 8e6, 0, {timed("local-default", 4)}));
  cases.push_back(report("indexer_logits", 8e6, 6e9, {timed("local-default", 40)}));
  ::testing::internal::CaptureStdout();
  printTable(run, cases);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("floor: the op's bytes at the copy bandwidth or its FLOPs at the mma.sync rate"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2.00 copy    50%"), std::string::npos) << out;
  EXPECT_NE(out.find("10.00 mma    25%"), std::string::npos) << out;
}

TEST(BenchReportFloor, NoCeilingsNoFloor) {
  RunInfo run;  // the benchmark kernels could not run: no ceilings
  std::vector<CaseReport> cases;
  cases.push_back(report("topk", 8e6, 0, {timed("local-default", 4)}));
  auto parsed = llvm::json::parse(toJson(run, cases));
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object& row = at(*parsed->getAsObject()->getArray("rows"), 0);
  EXPECT_TRUE(row.get("roofline_bound")->getAsNull());
  EXPECT_TRUE(row.get("roofline_floor_us")->getAsNull());
  EXPECT_TRUE(row.get("roofline_fraction")->getAsNull());
}

}  // namespace
