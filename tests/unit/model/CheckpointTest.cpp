// Model-directory weights: exact fp8 / fp4 dequantization for every code, row gathers from
// engram tables, shards, and every error case (naming tensor and file).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "ModelTestFiles.h"
#include "deepinfer/Formats.h"
#include "model/Checkpoint.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;
using deepinfer::testing_util::ScratchDir;

namespace {

// Independent decoders (formula form, in double) so the loader is not checked against the
// helpers it uses itself.
double e4m3Ref(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? m * std::pow(2.0, -9) : (8 + m) * std::pow(2.0, e - 10);
  return s ? -mag : mag;
}
double e2m1Ref(uint8_t n) {
  const int e = (n >> 1) & 3, m = n & 1;
  const double mag = e == 0 ? 0.5 * m : (2 + m) * std::pow(2.0, e - 2);
  return (n & 8) ? -mag : mag;
}
double ue8m0Ref(uint8_t e) { return e == 255 ? NAN : std::pow(2.0, int(e) - 127); }

bool sameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

RawTensor raw(const std::string& dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  return RawTensor{dtype, std::move(shape), std::move(bytes)};
}

std::vector<uint8_t> bf16Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = floatToBf16(v[i]);
    std::memcpy(&out[2 * i], &b, 2);
  }
  return out;
}

Result<Checkpoint> openWith(const ScratchDir& dir, const std::map<std::string, RawTensor>& tensors) {
  Status st = writeSafetensors(dir.file("model.safetensors"), tensors);
  if (!st.ok()) return st.error();
  return Checkpoint::open(dir.path());
}

}  // namespace

TEST(CheckpointDequant, Fp8BlockEveryCodeAndScale) {
  ScratchDir dir("ck_fp8");
  // [64, 64]: every 32x32 block holds all 256 codes 4 times; four distinct block scales,
  // from the smallest exponent to one that overflows fp32 for large codes.
  std::vector<uint8_t> codes(64 * 64);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t((i * 37 + i / 64) & 0xFF);
  const std::vector<uint8_t> scales = {1, 120, 134, 254};
  auto ck = openWith(dir, {{"m.weight", raw("F8_E4M3", {64, 64}, codes)}, {"m.scale", raw("F8_E8M0", {2, 2}, scales)}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto info = ck->info("m.weight");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->format, WeightFormat::Fp8Block);
  EXPECT_EQ(info->scaleName, "m.scale");
  auto f = ck->loadF32("m.weight", {64, 64}, NonFinite::Keep);
  auto b = ck->loadBf16("m.weight", {64, 64}, NonFinite::Keep);
  ASSERT_TRUE(f.ok() && b.ok());
  std::set<int> seenCodes;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      const uint8_t code = codes[size_t(r * 64 + c)], s = scales[size_t((r / 32) * 2 + c / 32)];
      seenCodes.insert(code);
      // Both factors are exact in fp32; their fp32 product overflows to inf where it must.
      const float want = float(e4m3Ref(code)) * float(ue8m0Ref(s));
      ASSERT_TRUE(sameFloat(f->ptr<float>()[r * 64 + c], want)) << r << "," << c;
      const uint16_t wantB = std::isnan(want) ? 0x7FC0 : floatToBf16(want);
      ASSERT_EQ(b->ptr<uint16_t>()[r * 64 + c], wantB) << r << "," << c;
      ASSERT_EQ(wantB, dequantE4m3ToBf16(code, s));
    }
  EXPECT_EQ(seenCodes.size(), 256u);
}

TEST(CheckpointDequant, Fp8PartialBlocksAndSpecialScales) {
  ScratchDir dir("ck_fp8_edge");
  // [40, 50]: blocks of 32 with ragged edges -> scale [2, 2]. Scale 0 decodes to 2^-127 (a
  // weight scale, docs/model.md §3) and 0xFF to NaN (bf16 canonical 0x7FC0 even for negative
  // codes).
  std::mt19937 rng(7);
  std::vector<uint8_t> codes(40 * 50);
  for (uint8_t& c : codes) c = uint8_t(rng());
  const std::vector<uint8_t> scales = {127, 0, 255, 130};
  auto ck = openWith(dir, {{"w.weight", raw("F8_E4M3", {40, 50}, codes)}, {"w.scale", raw("F8_E8M0", {2, 2}, scales)}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto f = ck->loadF32("w.weight", {40, 50}, NonFinite::Keep);
  auto b = ck->loadBf16("w.weight", {40, 50}, NonFinite::Keep);
  ASSERT_TRUE(f.ok() && b.ok());
  for (int r = 0; r < 40; ++r)
    for (int c = 0; c < 50; ++c) {
      const uint8_t code = codes[size_t(r * 50 + c)], s = scales[size_t((r / 32) * 2 + c / 32)];
      const float got = f->ptr<float>()[r * 50 + c];
      const uint16_t gotB = b->ptr<uint16_t>()[r * 50 + c];
      if (s == 255 || (code & 0x7F) == 0x7F) {
        ASSERT_TRUE(std::isnan(got));
        ASSERT_EQ(gotB, 0x7FC0);
      } else if (s == 0) {
        // code * 2^-127 is an fp32 subnormal with at most 4 significant bits: exact.
        ASSERT_EQ(got, float(e4m3Ref(code) * std::ldexp(1.0, -127))) << r << "," << c;
        ASSERT_EQ(gotB, floatToBf16(got)) << r << "," << c;
      } else {
        ASSERT_EQ(got, float(e4m3Ref(code)) * float(ue8m0Ref(s))) << r << "," << c;
      }
    }
}

TEST(CheckpointDequant, Fp4EveryCodeLowNibbleIsEvenColumn) {
  ScratchDir dir("ck_fp4");
  // Logical [4, 128]: each row's 64 bytes hold byte values covering all 256 (lo, hi) pairs over
  // the 4 rows; per-row, per-32-column scales differ.
  std::vector<uint8_t> packed(4 * 64);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = uint8_t(i);
  std::vector<uint8_t> scales(4 * 4);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = uint8_t(120 + i);
  auto ck = openWith(dir, {{"layers.0.ffn.experts.3.w1.weight", raw("I8", {4, 64}, packed)},
                           {"layers.0.ffn.experts.3.w1.scale", raw("F8_E8M0", {4, 4}, scales)}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto info = ck->info("layers.0.ffn.experts.3.w1.weight");
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->format, WeightFormat::Fp4);
  EXPECT_EQ(info->logicalShape, (std::vector<int64_t>{4, 128}));
  EXPECT_EQ(info->storedShape, (std::vector<int64_t>{4, 64}));
  auto f = ck->loadF32("layers.0.ffn.experts.3.w1.weight", {4, 128}, NonFinite::Keep);
  auto b = ck->loadBf16("layers.0.ffn.experts.3.w1.weight", {4, 128}, NonFinite::Keep);
  ASSERT_TRUE(f.ok() && b.ok()) << (f.ok() ? b.error().message : f.error().message);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 128; ++c) {
      const uint8_t byte = packed[size_t(r * 64 + c / 2)];
      const uint8_t nib = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      const float want = float(e2m1Ref(nib) * ue8m0Ref(scales[size_t(r * 4 + c / 32)]));
      ASSERT_EQ(f->ptr<float>()[r * 128 + c], want) << r << "," << c;
      ASSERT_EQ(b->ptr<uint16_t>()[r * 128 + c], floatToBf16(want));
      ASSERT_EQ(e2m1Ref(nib), e2m1ToFloat(nib));
    }
  // The exact magnitudes of the format, in code order.
  const double mags[8] = {0, .5, 1, 1.5, 2, 3, 4, 6};
  for (int n = 0; n < 16; ++n) EXPECT_EQ(e2m1Ref(uint8_t(n)), (n & 8 ? -1 : 1) * mags[n & 7]);
}

TEST(CheckpointDequant, PlainDtypes) {
  ScratchDir dir("ck_plain");
  std::vector<float> vals = {1.f, -2.5f, 3.14159f, 1e-30f, -65504.f, 0.1f};
  std::vector<uint8_t> f32(vals.size() * 4);
  std::memcpy(f32.data(), vals.data(), f32.size());
  const std::vector<uint16_t> halves = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00, 0x3555};
  std::vector<uint8_t> f16(halves.size() * 2);
  std::memcpy(f16.data(), halves.data(), f16.size());
  auto ck = openWith(dir, {{"a", raw("F32", {2, 3}, f32)},
                           {"b", raw("BF16", {6}, bf16Bytes(vals))},
                           {"h", raw("F16", {6}, f16)},
                           {"i", raw("I32", {6}, std::vector<uint8_t>(24, 1))}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto a = ck->loadF32("a", {2, 3});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bytes, f32);
  auto ab = ck->loadBf16("a", {2, 3});
  ASSERT_TRUE(ab.ok());
  for (size_t i = 0; i < vals.size(); ++i) EXPECT_EQ(ab->ptr<uint16_t>()[i], floatToBf16(vals[i]));
  auto b = ck->loadF32("b", {6});
  ASSERT_TRUE(b.ok());
  for (size_t i = 0; i < vals.size(); ++i) EXPECT_EQ(b->ptr<float>()[i], bf16ToFloat(floatToBf16(vals[i])));
  auto h = ck->loadF32("h", {6}, NonFinite::Keep);
  ASSERT_TRUE(h.ok());
  const float wantH[6] = {1.f, -2.f, std::ldexp(1.f, -24), 65504.f, INFINITY, 0.333251953125f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(h->ptr<float>()[i], wantH[i]) << i;
  EXPECT_TRUE(failsWith(ck->loadF32("i", {6}), {"'i'", "I32", "not a floating-point"}));
}

TEST(CheckpointNonFinite, RejectedNamingTheTensorAndElement) {
  ScratchDir dir("ck_nonfinite");
  std::vector<float> vals = {1, 2, 3, 4, 5, 6};
  std::vector<float> withNan = vals, withInf = vals;
  withNan[4] = std::nanf("");
  withInf[1] = -INFINITY;
  auto f32Bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  std::vector<uint8_t> codes(32 * 32, 0x38);  // 1.0
  std::vector<uint8_t> nanCodes = codes;
  nanCodes[33] = 0x7F;  // e4m3 NaN at [1, 1]
  auto ck = openWith(dir, {{"ok", raw("F32", {2, 3}, f32Bytes(vals))},
                           {"nan", raw("F32", {2, 3}, f32Bytes(withNan))},
                           {"inf", raw("BF16", {6}, bf16Bytes(withInf))},
                           {"q.weight", raw("F8_E4M3", {32, 32}, nanCodes)},
                           {"q.scale", raw("F8_E8M0", {1, 1}, {127})},
                           {"s.weight", raw("F8_E4M3", {32, 32}, codes)},
                           {"s.scale", raw("F8_E8M0", {1, 1}, {255})}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_TRUE(ck->loadF32("ok", {2, 3}).ok());
  EXPECT_TRUE(failsWith(ck->loadF32("nan", {2, 3}), {"model.safetensors", "'nan'", "NaN", "[1, 1]", "finite"}));
  EXPECT_TRUE(failsWith(ck->loadBf16("nan", {2, 3}), {"'nan'", "NaN", "[1, 1]"}));
  EXPECT_TRUE(failsWith(ck->loadF32("inf", {6}), {"'inf'", "infinity", "[0, 1]"}));
  EXPECT_TRUE(failsWith(ck->loadBf16("q.weight", {32, 32}), {"'q.weight'", "NaN", "[1, 1]", "F8_E4M3", "0x7F"}));
  EXPECT_TRUE(failsWith(ck->loadF32("s.weight", {32, 32}), {"'s.weight'", "255 (NaN)", "[0, 0]", "'s.scale'"}));
  // Format tests may keep them.
  auto kept = ck->loadF32("nan", {2, 3}, NonFinite::Keep);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(std::isnan(kept->ptr<float>()[4]));
}

TEST(CheckpointNonFinite, EngramRowGathersRejectNaNRows) {
  ScratchDir dir("ck_engram_nan");
  std::vector<uint8_t> codes(4 * 32, 0x38), scales(4, 127);
  codes[2 * 32 + 5] = 0xFF;  // NaN in row 2, column 5
  const std::string name = "layers.1.engram.embed.weight";
  auto ck = openWith(dir, {{name, raw("F8_E4M3", {4, 32}, codes)},
                           {"layers.1.engram.embed.scale", raw("F8_E8M0", {4, 1}, scales)}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  std::vector<float> out(32);
  const int64_t good = 1, bad = 2;
  EXPECT_TRUE(ck->readEngramRows(name, &good, 1, out.data()).ok());
  EXPECT_TRUE(failsWith(ck->readEngramRows(name, &bad, 1, out.data()), {name.c_str(), "row 2", "NaN", "column 5"}));
}

// UE8M0 byte 0 of a weight scale is 2^-127 (docs/model.md §3), not +0 as in the KV-cache formats:
// every nonzero e2m1 code times 2^-127 is a bf16 subnormal, exact, and nonzero.
TEST(CheckpointDequant, WeightScaleByteZeroIsTwoToTheMinus127) {
  EXPECT_EQ(weightScaleToFloat(0), std::ldexp(1.f, -127));
  EXPECT_EQ(weightScaleToFloat(127), 1.f);
  EXPECT_TRUE(std::isnan(weightScaleToFloat(255)));
  EXPECT_EQ(ue8m0ToFloat(0), 0.f);  // the cache formats keep +0 (docs/ops.md §1.2)
  ScratchDir dir("ck_scale0");
  std::vector<uint8_t> packed(32);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = uint8_t(i * 7 + 1);
  auto ck = openWith(dir, {{"e.weight", raw("I8", {1, 32}, packed)}, {"e.scale", raw("F8_E8M0", {1, 2}, {0, 127})}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto f = ck->loadF32("e.weight", {1, 64});  // byte 0 is inside fp4's exact range: accepted
  auto b = ck->loadBf16("e.weight", {1, 64});
  ASSERT_TRUE(f.ok() && b.ok()) << (f.ok() ? b.error().message : f.error().message);
  int nonzero = 0;
  for (int c = 0; c < 64; ++c) {
    const uint8_t byte = packed[size_t(c / 2)];
    const uint8_t nib = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
    const double want = e2m1Ref(nib) * (c < 32 ? std::ldexp(1.0, -127) : 1.0);
    ASSERT_EQ(f->ptr<float>()[c], float(want)) << c;
    ASSERT_EQ(double(bf16ToFloat(b->ptr<uint16_t>()[c])), want) << c;  // exact in bf16
    nonzero += c < 32 && want != 0;
  }
  EXPECT_GT(nonzero, 20);
}

// The byte check both loaders share: scale bytes outside the exact range (fp8 3..246, fp4
// 0..252) and e4m3 NaN codes are errors naming tensor, scale, byte and element; the edges pass.
TEST(CheckpointQuantCheck, ScaleBytesOutsideTheExactRangeAreRejected) {
  ScratchDir dir("ck_scale_range");
  const std::vector<uint8_t> codes(64 * 64, 0x38), packed(2 * 32, 0x21);
  auto ck = openWith(dir, {{"lo.weight", raw("F8_E4M3", {64, 64}, codes)},
                           {"lo.scale", raw("F8_E8M0", {2, 2}, {3, 3, 3, 2})},
                           {"hi.weight", raw("F8_E4M3", {64, 64}, codes)},
                           {"hi.scale", raw("F8_E8M0", {2, 2}, {246, 247, 3, 3})},
                           {"ok.weight", raw("F8_E4M3", {64, 64}, codes)},
                           {"ok.scale", raw("F8_E8M0", {2, 2}, {3, 246, 127, 3})},
                           {"f4.weight", raw("I8", {2, 32}, packed)},
                           {"f4.scale", raw("F8_E8M0", {2, 2}, {0, 252, 252, 253})},
                           {"f4ok.weight", raw("I8", {2, 32}, packed)},
                           {"f4ok.scale", raw("F8_E8M0", {2, 2}, {0, 252, 252, 0})}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_TRUE(ck->loadF32("ok.weight", {64, 64}).ok());
  EXPECT_TRUE(ck->loadBf16("f4ok.weight", {2, 64}).ok());
  EXPECT_TRUE(failsWith(ck->loadF32("lo.weight", {64, 64}),
                        {"'lo.weight'", "'lo.scale'", "byte 2", "[1, 1]", "element [32, 32]", "3..246"}));
  EXPECT_TRUE(failsWith(ck->loadBf16("hi.weight", {64, 64}),
                        {"'hi.weight'", "byte 247", "[0, 1]", "element [0, 32]", "3..246"}));
  EXPECT_TRUE(failsWith(ck->loadF32("f4.weight", {2, 64}), {"'f4.weight'", "byte 253", "[1, 1]", "element [1, 32]",
                                                             "0..252", "e2m1"}));
  // The same check as a call of its own (the GPU loader's), and Keep skips it (format tests).
  auto ti = ck->info("hi.weight");
  ASSERT_TRUE(ti.ok());
  EXPECT_TRUE(failsWith(ck->checkQuantizedBytes(*ti), {"'hi.weight'", "byte 247"}));
  EXPECT_TRUE(ck->loadF32("hi.weight", {64, 64}, NonFinite::Keep).ok());
  auto okInfo = ck->info("ok.weight");
  ASSERT_TRUE(okInfo.ok());
  EXPECT_TRUE(ck->checkQuantizedBytes(*okInfo).ok());
}

TEST(CheckpointQuantCheck, E4m3NaNCodesFoundAnywhere) {
  // Every position of a row (the check reads 8 bytes at a time), both NaN codes.
  ScratchDir dir("ck_nan_pos");
  const int rows = 3, cols = 48;
  std::map<std::string, RawTensor> tensors;
  std::vector<std::pair<int, uint8_t>> cases;
  for (int at = 0; at < rows * cols; at += 7) cases.push_back({at, uint8_t(at % 2 ? 0xFF : 0x7F)});
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<uint8_t> codes(size_t(rows * cols), 0x7E);  // 448: the largest finite code
    for (int j = 0; j < rows * cols; j += 5) codes[size_t(j)] = 0xFE;
    codes[size_t(cases[i].first)] = cases[i].second;
    tensors.emplace(fmt::format("t{}.weight", i), raw("F8_E4M3", {rows, cols}, codes));
    tensors.emplace(fmt::format("t{}.scale", i), raw("F8_E8M0", {1, 2}, {100, 100}));
  }
  auto ck = openWith(dir, tensors);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  for (size_t i = 0; i < cases.size(); ++i) {
    const int at = cases[i].first;
    const std::string name = fmt::format("t{}.weight", i), quoted = "'" + name + "'";
    const std::string where = fmt::format("[{}, {}]", at / cols, at % cols);
    const std::string code = fmt::format("0x{:02X}", cases[i].second);
    EXPECT_TRUE(failsWith(ck->loadF32(name, {rows, cols}), {quoted.c_str(), "NaN", where.c_str(), code.c_str()})) << at;
  }
}

TEST(CheckpointEngram, RowGathersMatchFullLoad) {
  ScratchDir dir("ck_engram");
  const int rows = 300, cols = 256;
  std::mt19937 rng(3);
  std::vector<uint8_t> codes(size_t(rows * cols)), scales(size_t(rows * 8));
  for (uint8_t& c : codes) c = uint8_t(rng() % 0x7F);  // finite positive and negative codes
  for (size_t i = 0; i < codes.size(); i += 3) codes[i] |= 0x80;
  for (uint8_t& s : scales) s = uint8_t(110 + rng() % 30);
  const std::string name = "layers.1.engram.embed.weight";
  auto ck = openWith(dir, {{name, raw("F8_E4M3", {rows, cols}, codes)},
                           {"layers.1.engram.embed.scale", raw("F8_E8M0", {rows, 8}, scales)}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto info = ck->info(name);
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->format, WeightFormat::Fp8Row);
  auto full = ck->loadF32(name, {rows, cols});
  ASSERT_TRUE(full.ok());
  const std::vector<int64_t> want = {299, 0, 17, 17, 150};
  std::vector<float> got(want.size() * cols, -12345.f);  // poisoned
  ASSERT_TRUE(ck->readEngramRows(name, want.data(), want.size(), got.data()).ok());
  for (size_t i = 0; i < want.size(); ++i)
    for (int c = 0; c < cols; ++c) {
      const float ref = float(e4m3Ref(codes[size_t(want[i] * cols + c)]) *
                              ue8m0Ref(scales[size_t(want[i] * 8 + c / 32)]));
      ASSERT_EQ(got[i * cols + size_t(c)], ref);
      ASSERT_EQ(got[i * cols + size_t(c)], full->ptr<float>()[want[i] * cols + c]);
    }
  const int64_t bad[2] = {3, 300};
  EXPECT_TRUE(failsWith(ck->readEngramRows(name, bad, 2, got.data()), {name.c_str(), "row 300", "entry 1", "300 rows"}));
  const int64_t neg = -1;
  EXPECT_TRUE(failsWith(ck->readEngramRows(name, &neg, 1, got.data()), {"row -1"}));
  EXPECT_TRUE(failsWith(ck->readEngramRows("layers.1.engram.nothing", &neg, 1, got.data()),
                        {"'layers.1.engram.nothing'", "not in the checkpoint"}));
}

TEST(CheckpointErrors, TensorsAndScales) {
  ScratchDir dir("ck_errors");
  std::vector<uint8_t> codes(64 * 32, 0x38);
  auto ck = openWith(dir, {{"ok.weight", raw("F8_E4M3", {64, 32}, codes)},
                           {"ok.scale", raw("F8_E8M0", {2, 1}, {127, 127})},
                           {"noscale.weight", raw("F8_E4M3", {64, 32}, codes)},
                           {"badshape.weight", raw("F8_E4M3", {64, 32}, codes)},
                           {"badshape.scale", raw("F8_E8M0", {1, 2}, {127, 127})},
                           {"baddtype.weight", raw("F8_E4M3", {64, 32}, codes)},
                           {"baddtype.scale", raw("U8", {2, 1}, {127, 127})},
                           {"flat.weight", raw("F8_E4M3", {2048}, codes)},
                           {"fp4odd.weight", raw("I8", {4, 8}, std::vector<uint8_t>(32, 0x21))},
                           {"fp4odd.scale", raw("F8_E8M0", {4, 1}, {127, 127, 127, 127})},
                           {"fp4noscale.weight", raw("I8", {4, 16}, std::vector<uint8_t>(64, 0x21))}});
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_TRUE(ck->has("ok.weight"));
  EXPECT_TRUE(ck->has("ok.scale"));
  EXPECT_FALSE(ck->has("missing.weight"));
  EXPECT_TRUE(ck->loadF32("ok.weight", {64, 32}).ok());
  EXPECT_TRUE(failsWith(ck->loadF32("missing.weight", {1}), {"'missing.weight'", "not in the checkpoint", dir.path().c_str()}));
  EXPECT_TRUE(failsWith(ck->loadF32("noscale.weight", {64, 32}),
                        {"model.safetensors", "'noscale.weight'", "no scale tensor 'noscale.scale'"}));
  EXPECT_TRUE(failsWith(ck->info("badshape.weight"), {"'badshape.scale'", "[1, 2]", "expected [2, 1]"}));
  EXPECT_TRUE(failsWith(ck->loadBf16("baddtype.weight", {64, 32}), {"'baddtype.scale'", "U8", "F8_E8M0"}));
  EXPECT_TRUE(failsWith(ck->info("flat.weight"), {"'flat.weight'", "2-D"}));
  EXPECT_TRUE(failsWith(ck->info("fp4odd.weight"), {"'fp4odd.weight'", "16 input columns", "32"}));
  EXPECT_TRUE(failsWith(ck->loadF32("fp4noscale.weight", {4, 32}), {"'fp4noscale.weight'", "'fp4noscale.scale'"}));
  // Wrong expected shape, and no expected shape at all.
  EXPECT_TRUE(failsWith(ck->loadF32("ok.weight", {32, 64}), {"model.safetensors", "'ok.weight'", "[64, 32]", "expected [32, 64]"}));
  EXPECT_TRUE(failsWith(ck->loadBf16("ok.weight", {}), {"'ok.weight'", "no expected shape"}));
  auto names = ck->names();
  EXPECT_EQ(names.size(), 11u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(CheckpointErrors, DirectoryAndShards) {
  ScratchDir dir("ck_shards");
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {dir.path().c_str(), "no model.safetensors"}));

  // Two shards + index; the scale sits in the other shard than its weight.
  std::vector<uint8_t> codes(32 * 32);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i % 0x7E);
  ASSERT_TRUE(writeSafetensors(dir.file("model-00001-of-00002.safetensors"),
                               std::map<std::string, RawTensor>{{"a.weight", raw("F8_E4M3", {32, 32}, codes)}})
                  .ok());
  ASSERT_TRUE(writeSafetensors(dir.file("model-00002-of-00002.safetensors"),
                               std::map<std::string, RawTensor>{{"a.scale", raw("F8_E8M0", {1, 1}, {128})},
                                                                {"b", raw("BF16", {2}, bf16Bytes({1.f, 2.f}))}})
                  .ok());
  const std::string index = R"({"metadata": {}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
      "a.scale": "model-00002-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})";
  testing_util::writeText(dir.file("model.safetensors.index.json"), index);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto a = ck->loadF32("a.weight", {32, 32});
  ASSERT_TRUE(a.ok()) << a.error().message;
  for (int i = 0; i < 32 * 32; ++i) ASSERT_EQ(a->ptr<float>()[i], float(e4m3Ref(codes[size_t(i)]) * 2.0));
  auto info = ck->info("b");
  ASSERT_TRUE(info.ok());
  EXPECT_NE(info->file.find("model-00002-of-00002.safetensors"), std::string::npos);

  // The index names a tensor its shard does not hold.
  testing_util::writeText(dir.file("model.safetensors.index.json"),
                          R"({"weight_map": {"zzz": "model-00001-of-00002.safetensors"}})");
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {"'zzz'", "model-00001-of-00002.safetensors", "no such tensor"}));
  // The index names a missing shard.
  testing_util::writeText(dir.file("model.safetensors.index.json"),
                          R"({"weight_map": {"a.weight": "model-00009-of-00009.safetensors"}})");
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {"model-00009-of-00009.safetensors", "cannot open"}));
  // Malformed index files.
  testing_util::writeText(dir.file("model.safetensors.index.json"), R"({"weight_map": 3})");
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {"model.safetensors.index.json", "weight_map"}));
  testing_util::writeText(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": 5}})");
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {"weight_map['a']", "file name"}));
  testing_util::writeText(dir.file("model.safetensors.index.json"), "{");
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {"model.safetensors.index.json", "invalid JSON"}));
  // A truncated shard: the error names the shard and the tensor.
  testing_util::writeText(dir.file("model.safetensors.index.json"), index);
  auto bytes = testing_util::readBytes(dir.file("model-00001-of-00002.safetensors"));
  bytes.resize(bytes.size() - 100);
  testing_util::writeBytes(dir.file("model-00001-of-00002.safetensors"), bytes);
  EXPECT_TRUE(failsWith(Checkpoint::open(dir.path()), {"model-00001-of-00002.safetensors", "'a.weight'", "truncated"}));
}
