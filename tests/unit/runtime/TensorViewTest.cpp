// Strided device tensor views (TensorView.h) and binding them to a kernel by canonical name
// (ViewLaunch.h): slicing, contiguity, bounds and the errors a caller sees. No GPU needed: views
// are addresses, and bindViews only checks them against the kernel's op.
#include <gtest/gtest.h>

#include <cstring>

#include "cases/OpCases.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/TensorView.h"
#include "deepinfer/ViewLaunch.h"
#include "params/GatherKcacheParams.h"

namespace deepinfer {
namespace {

constexpr uint64_t kBase = 0x10000;

TensorView inBuffer(TensorView v, uint64_t bytes) {
  v.bufferBase = kBase;
  v.bufferBytes = bytes;
  return v;
}

TEST(TensorView, ContiguousStridesAndExtent) {
  TensorView v = TensorView::contiguous(kBase, DType::BF16, {2, 3, 4});
  EXPECT_EQ(v.strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(v.isContiguous());
  EXPECT_TRUE(v.isNonOverlapping());
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.byteExtent(), 48u);
  EXPECT_EQ(TensorView::contiguous(kBase, DType::F32, {0, 5}).byteExtent(), 0u);
}

TEST(TensorView, SliceSelectNarrow) {
  TensorView v = inBuffer(TensorView::contiguous(kBase, DType::BF16, {4, 10, 8}), 4 * 10 * 8 * 2);
  auto rows = v.slice(1, 2, 7);  // rows 2..6 of every request: strided, inner dims dense
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  EXPECT_EQ(rows->addr, kBase + 2 * 8 * 2);
  EXPECT_EQ(rows->shape, (std::vector<int64_t>{4, 5, 8}));
  EXPECT_EQ(rows->strides, (std::vector<int64_t>{80, 8, 1}));
  EXPECT_FALSE(rows->isContiguous());
  EXPECT_TRUE(rows->isNonOverlapping());
  EXPECT_TRUE(rows->checkBounds().ok());
  EXPECT_EQ(rows->byteExtent(), uint64_t((3 * 80 + 4 * 8 + 7 + 1) * 2));

  auto req = v.select(0, 3);  // the last request: dense again
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->addr, kBase + 3 * 80 * 2);
  EXPECT_EQ(req->shape, (std::vector<int64_t>{10, 8}));
  EXPECT_TRUE(req->isContiguous());

  auto n = v.narrow(0, 1, 2);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->isContiguous());  // a range of the outermost dim stays dense
  EXPECT_EQ(n->addr, kBase + 80 * 2);

  // A slice of one element along a dim is contiguous whatever that dim's stride.
  auto one = v.slice(1, 3, 4);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->isContiguous());  // dim 0 still steps over 10 rows
  auto single = one->select(0, 0);
  ASSERT_TRUE(single.ok());
  EXPECT_TRUE(single->isContiguous());
}

TEST(TensorView, SliceErrorsNameTheDim) {
  TensorView v = TensorView::contiguous(kBase, DType::BF16, {4, 10});
  auto bad = v.slice(1, 3, 11);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("[3, 11) is not a range of dim 1 (size 10)"), std::string::npos)
      << bad.error().message;
  EXPECT_FALSE(v.slice(2, 0, 1).ok());
  EXPECT_FALSE(v.select(0, 4).ok());
  EXPECT_FALSE(v.select(0, -1).ok());
  EXPECT_FALSE(v.narrow(1, 2, -1).ok());
}

TEST(TensorView, ReshapeOnlyWhenContiguous) {
  TensorView v = TensorView::contiguous(kBase, DType::F32, {4, 6});
  auto r = v.reshape({2, 12});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->strides, (std::vector<int64_t>{12, 1}));
  auto wrong = v.reshape({5, 5});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("24 elements"), std::string::npos) << wrong.error().message;
  auto cols = v.slice(1, 0, 3);
  ASSERT_TRUE(cols.ok());
  auto notDense = cols->reshape({12});
  ASSERT_FALSE(notDense.ok());
  EXPECT_NE(notDense.error().message.find("not contiguous"), std::string::npos) << notDense.error().message;
}

TEST(TensorView, StridedChecksAndOverlap) {
  EXPECT_FALSE(TensorView::strided(kBase, DType::BF16, {2, 3}, {3}).ok());
  EXPECT_FALSE(TensorView::strided(kBase, DType::BF16, {2, 3}, {-3, 1}).ok());
  EXPECT_FALSE(TensorView::strided(kBase, DType::BF16, {2, -3}, {3, 1}).ok());
  auto overlap = TensorView::strided(kBase, DType::BF16, {2, 3}, {2, 1});
  ASSERT_TRUE(overlap.ok());
  EXPECT_FALSE(overlap->isNonOverlapping());
  auto bcast = TensorView::strided(kBase, DType::BF16, {2, 3}, {0, 1});
  ASSERT_TRUE(bcast.ok());
  EXPECT_FALSE(bcast->isNonOverlapping());
  auto transposed = TensorView::strided(kBase, DType::BF16, {3, 2}, {1, 3});
  ASSERT_TRUE(transposed.ok());
  EXPECT_TRUE(transposed->isNonOverlapping());
  EXPECT_FALSE(transposed->isContiguous());
}

TEST(TensorView, BoundsAgainstTheBuffer) {
  // 2 requests x 6 rows x 8 values fill 192 bytes exactly; a view one row longer does not fit.
  auto fits = TensorView::strided(kBase, DType::BF16, {2, 5, 8}, {48, 8, 1});
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(inBuffer(*fits, 192).checkBounds().ok());
  auto shifted = inBuffer(*fits, 192);
  shifted.addr += 16;  // starts one row later: its last row is row 6 of request 1, still inside
  EXPECT_TRUE(shifted.checkBounds().ok());
  shifted.addr += 16;  // now past the end
  auto s = shifted.checkBounds();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("outside the buffer"), std::string::npos) << s.error().message;
  TensorView before = inBuffer(*fits, 192);
  before.addr = kBase - 2;
  EXPECT_FALSE(before.checkBounds().ok());
  // Unknown buffer range: nothing to check against.
  EXPECT_TRUE(fits->checkBounds().ok());
}

// A gather_kcache kernel description (no GPU: bindViews only reads the description).
struct GatherFixture {
  LoadedKernel k;
  int64_t R = 0, M = 0;
  GatherFixture() {
    auto cases = testing::casesFor("gather_kcache", 7, false);
    const auto& c = cases.front();
    auto d = describeOp("gather_kcache", c.attrs, c.inputs);
    EXPECT_TRUE(d.ok()) << d.error().message;
    k.desc = *d;
    R = k.desc.dim("out", 0);
    M = k.desc.dim("out", 1);
  }
  TensorViewMap views(uint64_t outAddr) const {
    TensorViewMap v;
    uint64_t a = 0x100000;
    for (const auto& [name, shape] : k.desc.shapes) {
      const DType dt = name == "k_cache" ? DType::U8 : name == "out" ? DType::BF16 : DType::I32;
      v[name] = TensorView::contiguous(a, dt, shape);
      a += 0x10000000;
    }
    v["out"] = TensorView::contiguous(outAddr, DType::BF16, {R, M, 512});
    return v;
  }
};

TEST(ViewLaunch, DenseViewsBindLikeAddresses) {
  GatherFixture f;
  auto b = bindViews(f.k, f.views(0x900000));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->addrs.at("out"), 0x900000u);
  EXPECT_TRUE(b->strides.empty());
}

TEST(ViewLaunch, StridedOutOfGatherIsAccepted) {
  GatherFixture f;
  // out = rows [2, 2 + M) of a [R, M + 5, 512] workspace: request stride (M + 5) * 512.
  TensorView ws = inBuffer(TensorView::contiguous(kBase, DType::BF16, {f.R, f.M + 5, 512}),
                           uint64_t(f.R * (f.M + 5) * 512 * 2));
  auto out = ws.slice(1, 2, 2 + f.M);
  ASSERT_TRUE(out.ok());
  auto views = f.views(0);
  views["out"] = *out;
  auto b = bindViews(f.k, views);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->addrs.at("out"), kBase + 2 * 512 * 2);
  EXPECT_EQ(b->strides.at("out"), (std::vector<int64_t>{(f.M + 5) * 512, 512, 1}));

  // The params carry the strides; the dense path packs the dense ones.
  const KernelFamily* fam = findKernelFamily("gather_kcache");
  const KernelConfig cfg = {{"warps", 8}, {"tokens_per_warp", 1}, {"ctas_per_sm", 8}, {"grid_ctas", 1}};
  auto strided = fam->packStridedParams(cfg, f.k.desc, b->addrs, b->strides);
  ASSERT_TRUE(strided.ok()) << strided.error().message;
  di::GatherKcacheParams p;
  ASSERT_EQ(strided->size(), sizeof(p));
  std::memcpy(&p, strided->data(), sizeof(p));
  EXPECT_EQ(p.out_req_stride, (f.M + 5) * 512);
  EXPECT_EQ(p.out_row_stride, 512);
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.out), kBase + 2 * 512 * 2);
  auto dense = fam->packParams(cfg, f.k.desc, b->addrs);
  ASSERT_TRUE(dense.ok());
  std::memcpy(&p, dense->data(), sizeof(p));
  EXPECT_EQ(p.out_req_stride, f.M * 512);
  EXPECT_EQ(p.out_row_stride, 512);
}

TEST(ViewLaunch, StridedOutNeedsWholeAlignedRows) {
  GatherFixture f;
  auto views = f.views(0);
  // Rows of 512 values at a stride of 1028 elements: not a multiple of 8 (16-byte stores).
  auto odd = TensorView::strided(kBase, DType::BF16, {f.R, f.M, 512}, {f.M * 1028, 1028, 1});
  ASSERT_TRUE(odd.ok());
  views["out"] = *odd;
  auto b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("tensor 'out' is not contiguous"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("multiple of 8"), std::string::npos) << b.error().message;
  // A row split in two halves (dim 2 not dense).
  auto split = TensorView::strided(kBase, DType::BF16, {f.R, f.M, 512}, {f.M * 2048, 2048, 2});
  ASSERT_TRUE(split.ok());
  views["out"] = *split;
  b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("contiguous (stride 1 in dim 2)"), std::string::npos) << b.error().message;
}

TEST(ViewLaunch, NonContiguousInputIsRejectedWithItsStrides) {
  GatherFixture f;
  auto views = f.views(0x900000);
  const auto& bt = f.k.desc.shapes.at("block_table");
  // block_table as every other column of a wider table.
  auto wide = TensorView::strided(0x200000, DType::I32, bt, {bt[1] * 2, 2});
  ASSERT_TRUE(wide.ok());
  views["block_table"] = *wide;
  auto b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  const std::string& m = b.error().message;
  EXPECT_NE(m.find("tensor 'block_table' is not contiguous"), std::string::npos) << m;
  EXPECT_NE(m.find(dimsString({bt[1] * 2, 2})), std::string::npos) << m;
}

// A plan's zeroed workspace ("__zeroed", e.g. split-K arrival counters) is required when the plan
// declares one and must be a dense U8 view of at least its bytes, like "__workspace".
TEST(ViewLaunch, ZeroedWorkspaceIsRequiredAndSized) {
  GatherFixture f;
  auto views = f.views(0x900000);
  auto b = bindViews(f.k.desc, views, 0, 64);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("64 byte workspace that is zero on entry (\"__zeroed\")"), std::string::npos)
      << b.error().message;
  views["__zeroed"] = TensorView::contiguous(0x700000, DType::U8, {32});
  b = bindViews(f.k.desc, views, 0, 64);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("'__zeroed' must be a dense U8 view of at least 64 bytes"), std::string::npos)
      << b.error().message;
  views["__zeroed"] = TensorView::contiguous(0x700000, DType::U8, {64});
  b = bindViews(f.k.desc, views, 0, 64);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->addrs.at("__zeroed"), 0x700000u);
}

TEST(ViewLaunch, DtypeShapeAndNameErrors) {
  GatherFixture f;
  auto views = f.views(0x900000);
  views["seq_lens"].dtype = DType::I64;
  auto b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("tensor 'seq_lens' is I64, expected I32"), std::string::npos) << b.error().message;

  views = f.views(0x900000);
  views["out"] = TensorView::contiguous(0x900000, DType::BF16, {f.R, f.M + 1, 512});
  b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("tensor 'out' has shape"), std::string::npos) << b.error().message;

  views = f.views(0x900000);
  views["q"] = TensorView::contiguous(0x900000, DType::BF16, {1});
  b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("no tensor 'q'"), std::string::npos) << b.error().message;

  views = f.views(0x900000);
  views.erase("block_table");
  b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("no view given for tensor 'block_table'"), std::string::npos)
      << b.error().message;

  // A view that leaves its buffer.
  views = f.views(0x900000);
  views["out"] = inBuffer(TensorView::contiguous(kBase, DType::BF16, {f.R, f.M, 512}),
                          uint64_t(f.R * f.M * 512 * 2 - 2));
  b = bindViews(f.k, views);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("outside the buffer"), std::string::npos) << b.error().message;
}

}  // namespace
}  // namespace deepinfer
