#include "QuantGemmOps.h"

#include <fmt/format.h>

namespace deepinfer {

std::vector<int64_t> DeviceQuantWeight::codeShape() const {
  return bits == 8 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows, cols / 2};
}

std::vector<int64_t> DeviceQuantWeight::scaleShape() const {
  return bits == 8 ? std::vector<int64_t>{(rows + 31) / 32, (cols + 31) / 32} : std::vector<int64_t>{rows, cols / 32};
}

Status weightGemm(DiOps& ops, uint64_t x, int64_t M, const DeviceQuantWeight& w, uint64_t y, GemmEpilogue epilogue,
                  void* stream, int64_t groups, const DeviceQuantWeight* up, double limit) {
  if ((epilogue == GemmEpilogue::Swiglu) != (up != nullptr))
    return Error{"weightGemm: the SwiGLU epilogue needs the up projection, and only it reads one"};
  if (up && (up->rows != w.rows || up->cols != w.cols || up->bits != w.bits))
    return Error{fmt::format("weightGemm: the up projection [{}, {}] ({} bits) differs from w [{}, {}] ({} bits)",
                             up->rows, up->cols, up->bits, w.rows, w.cols, w.bits)};
  OpAttrs a;
  a.setInt("weight_bits", w.bits);
  a.setInt("groups", groups);
  a.setInt("epilogue", int64_t(epilogue));
  a.setFloat("swiglu_limit", limit);
  std::map<std::string, DiTensor> t = {{"x", {x, {M, groups * w.cols}}},
                                       {"w", {w.codes, w.codeShape()}},
                                       {"w_scale", {w.scales, w.scaleShape()}},
                                       {"y", {y, {M, w.rows}}}};
  if (up) {
    t["w_up"] = {up->codes, up->codeShape()};
    t["w_up_scale"] = {up->scales, up->scaleShape()};
  }
  return ops.run("weight_gemm", a, t, stream);
}

Status moeExperts(DiOps& ops, uint64_t x, uint64_t ids, uint64_t weights, int64_t T, int64_t k,
                  const DeviceExpertWeights& w, uint64_t y, void* stream, double limit) {
  const int64_t E = w.experts, C = w.hidden, I = w.intermediate;
  OpAttrs a;
  a.setFloat("swiglu_limit", limit);
  return ops.run("moe_experts", a,
                 {{"x", {x, {T, C}}},
                  {"ids", {ids, {T, k}}},
                  {"weights", {weights, {T, k}}},
                  {"w1", {w.w1, {E, I, C / 2}}},
                  {"w1_scale", {w.w1Scale, {E, I, C / 32}}},
                  {"w3", {w.w3, {E, I, C / 2}}},
                  {"w3_scale", {w.w3Scale, {E, I, C / 32}}},
                  {"w2", {w.w2, {E, C, I / 2}}},
                  {"w2_scale", {w.w2Scale, {E, C, I / 32}}},
                  {"y", {y, {T, k, C}}}},
                 stream);
}

}  // namespace deepinfer
