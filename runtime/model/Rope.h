// Rotary position embedding tables of docs/model.md §6 and §9: one table per layer, YaRN for
// layers with compression (ratio > 0), plain for window-only layers.
#pragma once
#include <cstdint>
#include <vector>

#include "deepinfer/Error.h"

namespace deepinfer {

struct ModelConfig;

class RopeTable {
 public:
  RopeTable() = default;

  // Plain RoPE over `ropeDim` dims: inv_freq_i = base^(-2i/ropeDim), i < ropeDim/2.
  static Result<RopeTable> plain(int ropeDim, double base);
  // YaRN: low-frequency pairs are divided by `factor`, blended by a linear ramp between the
  // correction dims of betaFast and betaSlow. No attention-scale change (docs/model.md §6).
  static Result<RopeTable> yarn(int ropeDim, double base, double factor, double betaFast,
                                double betaSlow, int64_t originalMaxPositions);
  // The table of `layer`: YaRN with compress_rope_theta for ratio > 0 when the config has a
  // rope_scaling block, otherwise plain with rope_theta (ratio 0) or compress_rope_theta.
  static Result<RopeTable> forLayer(const ModelConfig& cfg, int layer);

  int ropeDim() const { return int(invFreq_.size() * 2); }
  // inv_freq computed in fp64 and rounded once to fp32 (docs/model.md §9).
  const std::vector<float>& invFreq() const { return invFreq_; }

  // Rotates the adjacent pairs (2i, 2i+1) of `x[0 .. ropeDim)` by the angle fp32(pos *
  // inv_freq_i), in fp32; `inverse` rotates by -angle (used to un-rotate attention outputs).
  // No rounding here: callers round the whole vector to bf16 once.
  void rotate(float* x, int64_t pos, bool inverse) const;

 private:
  std::vector<float> invFreq_;
};

}  // namespace deepinfer
