// The GPU test cases (tests/cases): reproducible from the seed, accepted by the reference,
// covering the edges they promise; and compareOutputs applying each op's rule, able to fail.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "RefTestUtil.h"
#include "deepinfer/Formats.h"

namespace deepinfer::testing {
namespace {

TEST(OpCases, SameSeedSameBytesOtherSeedOtherBytes) {
  for (const char* op : {"kv_quant_insert", "combine_topk_swa", "topk", "mhc_post"}) {
    const std::vector<OpCase> a = casesFor(op, 42, false), b = casesFor(op, 42, false),
                              c = casesFor(op, 43, false);
    ASSERT_EQ(a.size(), b.size());
    std::set<std::string> names;
    bool anyDiffers = false;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(names.insert(a[i].name).second) << op << ": duplicate case name " << a[i].name;
      EXPECT_EQ(a[i].op, op);
      for (const auto& [name, t] : a[i].inputs) {
        EXPECT_EQ(t.bytes, b[i].inputs.at(name).bytes) << op << "/" << a[i].name << " " << name;
        anyDiffers |= t.bytes != c[i].inputs.at(name).bytes;
      }
    }
    EXPECT_TRUE(anyDiffers) << op << ": another seed gave the same inputs";
  }
}

TEST(OpCases, UnknownOpThrows) { EXPECT_THROW(casesFor("no_such_op", 1, false), std::invalid_argument); }

TEST(OpCases, CoverTheEdges) {
  std::set<int64_t> bs, heads, idxHeads, mhcT, mhcC, sq;
  bool qslOffset = false, decodeWithExtra = false, decodeWithout = false;
  for (const OpCase& c : casesFor("gather_kcache", 1, false)) bs.insert(c.attrs.getInt("block_size", 0));
  EXPECT_EQ(bs, (std::set<int64_t>{2, 64, 256}));
  for (const OpCase& c : casesFor("combine_topk_swa", 1, false))
    qslOffset |= c.inputs.at("query_start_loc").ptr<int32_t>()[0] != 0;
  EXPECT_TRUE(qslOffset);
  for (const OpCase& c : casesFor("sparse_mla_prefill", 1, false)) heads.insert(c.inputs.at("q").dim(1));
  for (const OpCase& c : casesFor("sparse_mla_decode", 1, false)) {
    heads.insert(c.inputs.at("q").dim(2));
    sq.insert(c.inputs.at("q").dim(1));
    (c.inputs.count("extra_cache") ? decodeWithExtra : decodeWithout) = true;
  }
  EXPECT_EQ(heads, (std::set<int64_t>{8, 16, 64, 128}));
  EXPECT_EQ(sq, (std::set<int64_t>{1, 2}));
  EXPECT_TRUE(decodeWithExtra && decodeWithout);
  for (const OpCase& c : casesFor("indexer_logits", 1, false)) idxHeads.insert(c.inputs.at("q").dim(1));
  EXPECT_EQ(idxHeads, (std::set<int64_t>{4, 32, 64}));
  for (const OpCase& c : casesFor("mhc_pre", 1, false)) {
    mhcT.insert(c.inputs.at("x").dim(0));
    mhcC.insert(c.inputs.at("x").dim(2));
  }
  EXPECT_EQ(mhcT, (std::set<int64_t>{1, 2, 6, 12, 15, 16, 17, 64}));
  EXPECT_EQ(mhcC, (std::set<int64_t>{256, 5120, 16384}));
}

// A reference run of the op's first case: expected outputs and the case.
struct RefRun {
  OpCase c;
  TensorMap out;
};
RefRun runFirst(const std::string& op) {
  RefRun r{casesFor(op, 13, false).front(), {}};
  r.out = r.c.inputs;
  EXPECT_EQ(runError(op, r.c.attrs, r.out), "");
  return r;
}

CompareReport cmp(const RefRun& r, const std::string& name, const HostTensor& actual) {
  return compareOutputs(r.c.op, name, r.out.at(name), actual, r.c.attrs, r.c.inputs);
}

TEST(CompareOutputs, BitExactOpsCatchOneBit) {
  RefRun r = runFirst("gather_kcache");
  EXPECT_TRUE(cmp(r, "out", r.out.at("out")).ok);
  HostTensor bad = r.out.at("out");
  bad.bytes[0] ^= 1;  // row 0 of request 0: a written row at offset 0
  CompareReport rep = cmp(r, "out", bad);
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.maxErr, 1);
  EXPECT_NE(rep.detail.find("first at [0, 0, 0] (a written row)"), std::string::npos) << rep.detail;
  bad = r.out.at("out");
  bad.bytes[bad.bytes.size() - 1] ^= 0x80;  // the last row is past every gathered range
  rep = cmp(r, "out", bad);
  EXPECT_NE(rep.detail.find("a row the op must not touch"), std::string::npos) << rep.detail;

  RefRun t = runFirst("topk");
  bad = t.out.at("indices");
  int64_t at = 0;
  while (bad.ptr<int32_t>()[at] < 0) ++at;  // the first selected index
  bad.ptr<int32_t>()[at] += 1;
  EXPECT_FALSE(compareOutputs("topk", "indices", t.out.at("indices"), bad, t.c.attrs, t.c.inputs).ok);
  HostTensor shape = t.out.at("indices");
  shape.shape.back() += 1;
  shape.bytes.resize(shape.bytes.size() + 4 * size_t(shape.shape[0]));
  rep = compareOutputs("topk", "indices", t.out.at("indices"), shape, t.c.attrs, t.c.inputs);
  EXPECT_FALSE(rep.ok);
  EXPECT_NE(rep.detail.find("expected I32"), std::string::npos) << rep.detail;
}

TEST(CompareOutputs, AttentionToleranceAndInfiniteLse) {
  RefRun r = runFirst("sparse_mla_prefill");
  auto shifted = [&](const char* name, float by, int64_t at) {
    HostTensor t = r.out.at(name);
    if (t.dtype == DType::BF16) {
      // Pick a value whose bf16 neighbours are fine enough to land within 1e-4 of +by.
      t.ptr<uint16_t>()[at] = floatToBf16(bf16ToFloat(t.ptr<uint16_t>()[at]) + by);
    } else {
      t.ptr<float>()[at] += by;
    }
    return t;
  };
  // out: find an element of small magnitude so the shift is represented almost exactly.
  int64_t small = 0;
  const HostTensor& out = r.out.at("out");
  while (std::fabs(bf16At(out, small)) > 0.05f || bf16At(out, small) == 0.f) ++small;
  EXPECT_TRUE(cmp(r, "out", shifted("out", 4e-3f, small)).ok);
  CompareReport rep = cmp(r, "out", shifted("out", 6e-3f, small));
  EXPECT_FALSE(rep.ok);
  EXPECT_NEAR(rep.maxErr, 6e-3, 5e-4);

  // lse: token 0 has no entries (+inf); token 1 is a full row (finite).
  const int64_t H = r.c.inputs.at("q").dim(1);
  ASSERT_EQ(r.out.at("lse").ptr<float>()[0], INFINITY);
  EXPECT_TRUE(cmp(r, "lse", shifted("lse", 9e-4f, H)).ok);
  EXPECT_FALSE(cmp(r, "lse", shifted("lse", 1.1e-3f, H)).ok);
  HostTensor finite = r.out.at("lse");
  finite.ptr<float>()[0] = 1e30f;
  EXPECT_FALSE(cmp(r, "lse", finite).ok);
  HostTensor nan = r.out.at("out");
  nan.ptr<uint16_t>()[small] = 0x7FC0;
  EXPECT_FALSE(cmp(r, "out", nan).ok);
}

TEST(CompareOutputs, IndexerRowRelativeAndNegInf) {
  RefRun r = runFirst("indexer_logits");
  const HostTensor& s = r.out.at("scores");
  const int64_t N = s.dim(1);
  float rowMax = 0;  // token 0 sees every position
  for (int64_t i = 0; i < N; ++i) rowMax = std::max(rowMax, std::fabs(s.ptr<float>()[i]));
  HostTensor a = s;
  a.ptr<float>()[3] += 0.9e-4f * rowMax;
  EXPECT_TRUE(cmp(r, "scores", a).ok);
  a.ptr<float>()[3] = s.ptr<float>()[3] + 1.2e-4f * rowMax;
  EXPECT_FALSE(cmp(r, "scores", a).ok);
  a = s;
  ASSERT_EQ(s.ptr<float>()[N + N - 1], -INFINITY);  // token 1 sees nothing
  a.ptr<float>()[N + N - 1] = -1e30f;
  EXPECT_FALSE(cmp(r, "scores", a).ok);
}

TEST(CompareOutputs, MhcUlpsAbsAndRelative) {
  RefRun r = runFirst("mhc_fused_post_pre");
  HostTensor x = r.out.at("x");
  int64_t big = 0;  // an element far from zero, where ulps decide
  const int64_t C = x.dim(2);
  float rowMax = 0;
  for (int64_t i = 0; i < C; ++i) rowMax = std::max(rowMax, std::fabs(bf16At(x, i)));
  while (std::fabs(bf16At(x, big)) < 0.5f * rowMax) ++big;
  const uint16_t b = x.ptr<uint16_t>()[big];
  x.ptr<uint16_t>()[big] = uint16_t(b + 2);  // two ulps further from zero
  EXPECT_TRUE(cmp(r, "x", x).ok);
  x.ptr<uint16_t>()[big] = uint16_t(b + 3);
  CompareReport rep = cmp(r, "x", x);
  EXPECT_FALSE(rep.ok);
  EXPECT_EQ(rep.maxErr, 3);
  EXPECT_EQ(rep.metric, "bf16 ulps (beyond 2^-14 of the row's max)");

  HostTensor comb = r.out.at("comb");
  comb.ptr<float>()[5] += 1.9e-3f;
  EXPECT_TRUE(cmp(r, "comb", comb).ok);
  comb.ptr<float>()[5] += 2e-4f;
  EXPECT_FALSE(cmp(r, "comb", comb).ok);

  RefRun p = runFirst("mhc_post");
  HostTensor sq = p.out.at("sqrsum");
  sq.ptr<float>()[0] *= 1.f + 1.5e-5f;
  EXPECT_TRUE(compareOutputs("mhc_post", "sqrsum", p.out.at("sqrsum"), sq, p.c.attrs, p.c.inputs).ok);
  sq.ptr<float>()[0] = p.out.at("sqrsum").ptr<float>()[0] * (1.f + 3e-5f);
  EXPECT_FALSE(compareOutputs("mhc_post", "sqrsum", p.out.at("sqrsum"), sq, p.c.attrs, p.c.inputs).ok);
}

TEST(OpCases, OutputNamesFollowTheSignatures) {
  EXPECT_EQ(outputNames("kv_quant_insert"), (std::vector<std::string>{"k_cache"}));
  EXPECT_EQ(outputNames("sparse_mla_decode"), (std::vector<std::string>{"out", "lse"}));
  EXPECT_EQ(outputNames("mhc_fused_post_pre"),
            (std::vector<std::string>{"x", "layer_input", "pre", "post", "comb"}));
}

}  // namespace
}  // namespace deepinfer::testing
