// The epilogue arithmetic the references of weight_gemm and moe_experts share, with the rounding
// points of the CPU forward pass (runtime/model/CpuForwardMath.h silu, CpuLayersMoe.cpp
// swigluInPlace), and the near-tie rule of QuantGemmRef.h for bf16 outputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "deepinfer/Formats.h"

namespace deepinfer::ref {

inline float siluRef(float x) { return x / (1.0f + std::exp(-x)); }

// weight * (silu(min(g, limit)) * clamp(v, -limit, limit)) in fp32, before the bf16 rounding.
inline float swigluRef(float g, float v, float limit, float weight) {
  const float gi = std::min(g, limit);
  const float vi = std::clamp(v, -limit, limit);
  return weight * (siluRef(gi) * vi);
}

// How far the fp32 SwiGLU value can move when g and v move by at most dg and dv: silu' lies in
// [-0.1, 1.1] and min/clamp are 1-Lipschitz; 2^-19 of |F| covers both sides' fp32 evaluation.
inline double swigluSlack(float g, float v, float limit, float weight, double dg, double dv) {
  const double vc = std::min(std::fabs(double(v)) + dv, double(limit));
  const double sg = std::fabs(double(siluRef(std::min(g, limit)))) + 1.1 * dg;
  const double f = std::fabs(double(swigluRef(g, v, limit, weight)));
  return std::fabs(double(weight)) * (1.1 * vc * dg + sg * dv) + std::ldexp(f, -19);
}

// The correctly rounded bf16 (as a float) of a double.
inline double bf16Of(double d) {
  float f = float(d);
  if (std::isfinite(f) && double(f) != d) {
    if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.f);
    f = bitsToFloat(floatToBits(f) | 1u);
  }
  return bf16ToFloat(floatToBf16(f));
}

// The largest difference between the bf16 roundings of two values within [F - dF, F + dF]: 0
// unless that interval holds a rounding boundary (a near-tie), else the span of the roundings.
inline double bf16TieSpan(double F, double dF) {
  if (!std::isfinite(F) || !std::isfinite(dF)) return INFINITY;
  return std::fabs(bf16Of(F + dF) - bf16Of(F - dF));
}

}  // namespace deepinfer::ref
