// Input checking of every reference op, driven by the signatures: a missing required tensor,
// a wrong dtype and a wrong rank are each reported by name, an unknown op or attribute is
// refused, and a failed call leaves the tensors as they were. Also: every element of every
// fresh output is written (none keeps the reference's output poison).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "RefTestUtil.h"
#include "deepinfer/OpSignature.h"
#include "reference/RefArgs.h"

namespace deepinfer::testing {
namespace {

// The generated cases of `op`, made once per test run.
const std::vector<OpCase>& cases(const std::string& op) {
  static std::map<std::string, std::vector<OpCase>> made;
  auto it = made.find(op);
  if (it == made.end()) it = made.emplace(op, casesFor(op, 99, false)).first;
  return it->second;
}

// The op's case with the fewest input bytes (cheap to run many times).
const OpCase& smallestCase(const std::string& op) {
  const std::vector<OpCase>& all = cases(op);
  auto bytes = [](const OpCase& c) {
    size_t n = 0;
    for (const auto& [name, t] : c.inputs) n += t.bytes.size();
    return n;
  };
  return *std::min_element(all.begin(), all.end(),
                           [&](const OpCase& a, const OpCase& b) { return bytes(a) < bytes(b); });
}

TEST(ReferenceErrors, EveryOpNamesMissingMisTypedAndMisShapedTensors) {
  ASSERT_EQ(referenceOps().size(), 14u);
  for (const std::string& op : referenceOps()) {
    const OpSignature* sig = findOpSignature(op);
    ASSERT_NE(sig, nullptr) << op;
    const OpCase& c = smallestCase(op);
    {
      TensorMap m = c.inputs;
      ASSERT_EQ(runError(op, c.attrs, m), "") << op << "/" << c.name;
    }
    for (const TensorSig& s : sig->inputs) {
      if (!c.inputs.count(s.name)) continue;  // an optional tensor the case leaves out
      if (!s.optional) {
        TensorMap m = c.inputs;
        m.erase(s.name);
        EXPECT_EQ(runError(op, c.attrs, m),
                  fmt::format("{}: missing required tensor '{}' ({})", op, s.name, dtypeName(s.dtype)));
      }
      {
        TensorMap m = c.inputs;
        HostTensor& t = m[s.name];
        t.dtype = s.dtype == DType::F32 ? DType::I32 : DType::F32;
        t.bytes.resize(size_t(t.numel()) * dtypeSize(t.dtype));
        EXPECT_EQ(runError(op, c.attrs, m), fmt::format("{}: tensor '{}' has dtype {}, expected {}", op,
                                                        s.name, dtypeName(t.dtype), dtypeName(s.dtype)));
      }
      {
        TensorMap m = c.inputs;
        // Two more dimensions, same bytes (one more could be a legal form, e.g. [B] -> [B, Sq]).
        m[s.name].shape.insert(m[s.name].shape.begin(), {1, 1});
        const std::string err = runError(op, c.attrs, m);
        EXPECT_NE(err.find(fmt::format("{}: tensor '{}' has shape", op, s.name)), std::string::npos)
            << op << " " << s.name << ": " << err;
      }
      {
        TensorMap m = c.inputs;
        m[s.name].bytes.push_back(0);
        EXPECT_NE(runError(op, c.attrs, m).find(fmt::format("tensor '{}' of shape", s.name)),
                  std::string::npos)
            << op << " " << s.name;
      }
    }
  }
}

TEST(ReferenceErrors, UnknownOpAndAttributes) {
  TensorMap m;
  const std::string err = runError("flash_attention", OpAttrs{}, m);
  EXPECT_EQ(err.rfind("no reference for op 'flash_attention' (known: kv_quant_insert, ", 0), 0u) << err;
  OpAttrs a;
  a.setInt("k", 4);
  a.setInt("kk", 1);
  EXPECT_EQ(runError("topk", a, m), "topk: unknown attribute 'kk'");
  a = OpAttrs{};
  a.setFloat("k", 2.5);
  m["scores"] = f32Of({1, 2}, {1, 2});
  m["lens"] = i32Tensor({1}, {2});
  EXPECT_EQ(runError("topk", a, m), "topk: attribute 'k' = 2.5 must be an integer");
}

TEST(ReferenceErrors, FailedCallsLeaveTensorsUnchanged) {
  for (const std::string& op : referenceOps()) {
    const OpCase& c = smallestCase(op);
    // Break the case at its last dimension check: an extra dimension on the last input.
    const OpSignature* sig = findOpSignature(op);
    const std::string last = sig->inputs.back().name;
    if (!c.inputs.count(last)) continue;
    TensorMap m = c.inputs;
    m[last].shape.insert(m[last].shape.begin(), {1, 1});
    const TensorMap before = m;
    ASSERT_NE(runError(op, c.attrs, m), "") << op;
    ASSERT_EQ(m.size(), before.size()) << op;
    for (const auto& [name, t] : before) EXPECT_EQ(m[name].bytes, t.bytes) << op << " " << name;
  }
}

TEST(ReferenceErrors, EveryOutputElementIsWritten) {
  for (const std::string& op : referenceOps()) {
    const OpSignature* sig = findOpSignature(op);
    for (const OpCase& c : cases(op)) {
      TensorMap m = c.inputs;
      ASSERT_EQ(runError(op, c.attrs, m), "") << op << "/" << c.name;
      for (const TensorSig& s : sig->outputs) {
        if (c.inputs.count(s.name) && op != "mhc_fused_post_pre") continue;  // in/out: not fresh
        const HostTensor& t = m[s.name];
        const size_t es = dtypeSize(t.dtype);
        for (int64_t i = 0; i < t.numel(); ++i) {
          const uint8_t* e = t.bytes.data() + size_t(i) * es;
          ASSERT_FALSE(std::all_of(e, e + es, [](uint8_t b) { return b == ref::kOutputPoisonByte; }))
              << op << "/" << c.name << " '" << s.name << "' element " << i << " was never written";
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::testing
