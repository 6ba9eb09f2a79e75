#include "Rope.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "ModelConfig.h"

namespace deepinfer {
namespace {

Status checkDim(int ropeDim, double base) {
  if (ropeDim <= 0 || ropeDim % 2 != 0)
    return Error{fmt::format("rope: rotary dim {} must be positive and even", ropeDim)};
  if (!(base > 1.0)) return Error{fmt::format("rope: base {} must be > 1", base)};
  return {};
}

// fp64 base frequencies base^(-2i/d).
std::vector<double> baseFrequencies(int ropeDim, double base) {
  std::vector<double> f(size_t(ropeDim / 2));
  for (int i = 0; i < ropeDim / 2; ++i) f[size_t(i)] = std::pow(base, -2.0 * i / ropeDim);
  return f;
}

std::vector<float> toFloat(const std::vector<double>& f) {
  std::vector<float> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = float(f[i]);
  return out;
}

}  // namespace

Result<RopeTable> RopeTable::plain(int ropeDim, double base) {
  DI_TRY(checkDim(ropeDim, base));
  RopeTable t;
  t.invFreq_ = toFloat(baseFrequencies(ropeDim, base));
  return t;
}

Result<RopeTable> RopeTable::yarn(int ropeDim, double base, double factor, double betaFast,
                                  double betaSlow, int64_t originalMaxPositions) {
  DI_TRY(checkDim(ropeDim, base));
  if (!(factor >= 1.0)) return Error{fmt::format("rope: yarn factor {} must be >= 1", factor)};
  if (originalMaxPositions <= 0)
    return Error{fmt::format("rope: yarn original_max_position_embeddings {} must be positive",
                             originalMaxPositions)};
  const double pi = std::acos(-1.0);
  // The pair index whose wavelength makes `rotations` turns over the original context.
  auto corr = [&](double rotations) {
    return ropeDim * std::log(double(originalMaxPositions) / (2 * pi * rotations)) /
           (2 * std::log(base));
  };
  const double low = std::max(std::floor(corr(betaFast)), 0.0);
  double high = std::min(std::ceil(corr(betaSlow)), double(ropeDim - 1));
  if (high == low) high += 0.001;  // keeps the ramp defined when both ends coincide
  std::vector<double> f = baseFrequencies(ropeDim, base);
  for (size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    f[i] = f[i] / factor * ramp + f[i] * (1 - ramp);
  }
  RopeTable t;
  t.invFreq_ = toFloat(f);
  return t;
}

Result<RopeTable> RopeTable::forLayer(const ModelConfig& cfg, int layer) {
  if (layer < 0 || layer >= int(cfg.layers.size()))
    return Error{fmt::format("rope: layer {} out of range [0, {})", layer, cfg.layers.size())};
  const LayerRole& role = cfg.role(layer);
  if (role.ratio == 0) return plain(cfg.qkRopeHeadDim, cfg.ropeTheta);
  const RopeScaling& s = cfg.ropeScaling;
  if (!s.present) return plain(cfg.qkRopeHeadDim, cfg.compressRopeTheta);
  if (s.type != "yarn")
    return Error{fmt::format("rope: layer {}: rope_scaling type '{}' is not supported (only "
                             "'yarn')", layer, s.type)};
  return yarn(cfg.qkRopeHeadDim, cfg.compressRopeTheta, s.factor, s.betaFast, s.betaSlow,
              s.originalMaxPositionEmbeddings);
}

void RopeTable::rotate(float* x, int64_t pos, bool inverse) const {
  for (size_t i = 0; i < invFreq_.size(); ++i) {
    // fp32(pos * inv_freq): the fp64 product is exact for any realistic position, so this is
    // one rounding of the true product.
    const float angle = float(double(pos) * double(invFreq_[i]));
    // Accurate libm cos/sin of the fp32 angle, evaluated in fp64 and rounded once.
    const float c = float(std::cos(double(angle)));
    const float s = inverse ? -float(std::sin(double(angle))) : float(std::sin(double(angle)));
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c - b * s;
    x[2 * i + 1] = a * s + b * c;
  }
}

}  // namespace deepinfer
