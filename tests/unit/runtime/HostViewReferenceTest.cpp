// The reference backend on host views (OpRunner.h: describeOp from views, runReferenceOnHostViews),
// the CPU path of the Python package: the same description as from host tensors, the same
// results as runReference, outputs written through strided views without touching anything
// else, and errors that name the tensor and leave memory alone.
#include <gtest/gtest.h>

#include "cases/OpCases.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"

namespace deepinfer::testing {
namespace {

uint64_t addrOf(const HostTensor& t) { return uint64_t(reinterpret_cast<uintptr_t>(t.bytes.data())); }

// Dense host views of every input of `inputs` and of freshly allocated outputs in `outs`.
TensorViewMap denseViews(const std::string& op, TensorMap& inputs, const OpDesc& d, TensorMap& outs) {
  TensorViewMap v;
  for (auto& [name, t] : inputs) v[name] = TensorView::contiguous(addrOf(t), t.dtype, t.shape);
  for (const auto& [name, spec] : findKernelFamily(op)->outputs(d)) {
    if (v.count(name)) continue;
    outs[name] = HostTensor(spec.first, spec.second);
    std::fill(outs[name].bytes.begin(), outs[name].bytes.end(), uint8_t(0x7F));
    v[name] = TensorView::contiguous(addrOf(outs[name]), spec.first, spec.second);
  }
  return v;
}

TEST(HostViewReference, DescribesLikeHostTensors) {
  for (const char* op : {"sparse_mla_decode", "gather_kcache", "mhc_fused_post_pre", "topk"}) {
    const auto c = casesFor(op, 3, false).front();
    TensorMap inputs = c.inputs;
    TensorViewMap views;
    for (auto& [name, t] : inputs) views[name] = TensorView::contiguous(addrOf(t), t.dtype, t.shape);
    auto fromTensors = describeOp(op, c.attrs, c.inputs);
    auto fromViews = describeOp(op, c.attrs, views);
    ASSERT_TRUE(fromTensors.ok() && fromViews.ok()) << op;
    EXPECT_EQ(fromTensors->shapes, fromViews->shapes) << op;
    EXPECT_EQ(fromTensors->attrs.all().size(), fromViews->attrs.all().size()) << op;
  }
}

TEST(HostViewReference, DescribeNamesAMistypedOrMissingTensor) {
  const auto c = casesFor("topk", 3, false).front();
  TensorMap inputs = c.inputs;
  TensorViewMap views;
  for (auto& [name, t] : inputs) views[name] = TensorView::contiguous(addrOf(t), t.dtype, t.shape);
  views["lens"].dtype = DType::I64;
  auto d = describeOp("topk", c.attrs, views);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("tensor 'lens' has dtype I64, expected I32"), std::string::npos)
      << d.error().message;
  views.erase("lens");
  d = describeOp("topk", c.attrs, views);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("missing input tensor 'lens'"), std::string::npos) << d.error().message;
}

TEST(HostViewReference, MatchesRunReferenceOnEveryOp) {
  for (const auto& op : referenceOps()) {
    for (const auto& c : casesFor(op, 5, false)) {
      TensorMap want = c.inputs;
      ASSERT_TRUE(runReference(op, c.attrs, want).ok()) << op << " " << c.name;
      TensorMap inputs = c.inputs, outs;
      auto d = describeOp(op, c.attrs, c.inputs);
      ASSERT_TRUE(d.ok()) << op << " " << c.name << ": " << d.error().message;
      const TensorViewMap views = denseViews(op, inputs, *d, outs);
      auto s = runReferenceOnHostViews(*d, views);
      ASSERT_TRUE(s.ok()) << op << " " << c.name << ": " << s.error().message;
      for (const auto& name : outputNames(op)) {
        const HostTensor& got = outs.count(name) ? outs.at(name) : inputs.at(name);
        EXPECT_EQ(got.bytes, want.at(name).bytes) << op << " " << c.name << " output " << name;
      }
    }
  }
}

TEST(HostViewReference, WritesAStridedOutputOnlyInsideItsView) {
  const auto c = casesFor("gather_kcache", 9, false).front();
  const HostTensor& out0 = c.inputs.at("out");
  const int64_t R = out0.dim(0), M = out0.dim(1), pad = 4, width = 512 + 2 * pad;
  HostTensor big(DType::BF16, {R, M, width});
  for (size_t i = 0; i < big.bytes.size(); ++i) big.bytes[i] = uint8_t(i * 29 + 3);
  // The view's elements start as the case's `out` (its untouched rows keep them).
  uint16_t* b = big.ptr<uint16_t>();
  for (int64_t i = 0; i < R * M; ++i)
    for (int64_t k = 0; k < 512; ++k) b[i * width + pad + k] = out0.ptr<uint16_t>()[i * 512 + k];
  const HostTensor before = big;

  TensorMap want = c.inputs;
  ASSERT_TRUE(runReference("gather_kcache", c.attrs, want).ok());
  TensorMap inputs = c.inputs;
  inputs.erase("out");
  TensorViewMap views;
  for (auto& [name, t] : inputs) views[name] = TensorView::contiguous(addrOf(t), t.dtype, t.shape);
  auto outView = TensorView::strided(addrOf(big) + pad * 2, DType::BF16, {R, M, 512}, {M * width, width, 1});
  ASSERT_TRUE(outView.ok());
  views["out"] = *outView;
  auto d = describeOp("gather_kcache", c.attrs, views);
  ASSERT_TRUE(d.ok()) << d.error().message;
  auto s = runReferenceOnHostViews(*d, views);
  ASSERT_TRUE(s.ok()) << s.error().message;
  int64_t bad = 0;
  for (int64_t i = 0; i < R * M; ++i)
    for (int64_t col = 0; col < width; ++col) {
      const int64_t k = col - pad;
      const uint16_t expect = k >= 0 && k < 512 ? want.at("out").ptr<uint16_t>()[i * 512 + k]
                                                : before.ptr<uint16_t>()[i * width + col];
      bad += b[i * width + col] != expect;
    }
  EXPECT_EQ(bad, 0);
}

TEST(HostViewReference, RejectsAStridedTensorTheKernelNeedsDenseAndWritesNothing) {
  const auto c = casesFor("topk", 4, false).front();
  TensorMap inputs = c.inputs, outs;
  auto d = describeOp("topk", c.attrs, c.inputs);
  ASSERT_TRUE(d.ok());
  TensorViewMap views = denseViews("topk", inputs, *d, outs);
  // `indices` as every other element of a buffer twice its size.
  const auto shape = views.at("indices").shape;
  HostTensor wide(DType::I32, {shape[0], 2 * shape[1]});
  std::fill(wide.bytes.begin(), wide.bytes.end(), uint8_t(0x5A));
  const HostTensor before = wide;
  auto v = TensorView::strided(addrOf(wide), DType::I32, shape, {2 * shape[1], 2});
  ASSERT_TRUE(v.ok());
  views["indices"] = *v;
  auto s = runReferenceOnHostViews(*d, views);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("tensor 'indices' is not contiguous"), std::string::npos) << s.error().message;
  EXPECT_EQ(wide.bytes, before.bytes);
}

}  // namespace
}  // namespace deepinfer::testing
