// Deterministic random numbers for synthetic weights: every row of every tensor has its own
// stream, seeded from (model seed, tensor name, row), so a tensor's values do not depend on
// generation order or on how many threads produce it.
#pragma once
#include <cstdint>
#include <string>

namespace deepinfer {

inline uint64_t splitMix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// FNV-1a: a stable hash of tensor names (std::hash may differ between standard libraries).
inline uint64_t stableHash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

// xoshiro256** seeded through splitmix64.
class DetRandom {
 public:
  DetRandom(uint64_t seed, const std::string& stream, uint64_t index) {
    uint64_t s = seed ^ stableHash(stream) ^ (index * 0xD1B54A32D192ED03ULL);
    for (uint64_t& w : s_) w = splitMix64(s);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, 1).
  float uniform() { return float(next() >> 40) * 0x1p-24f; }
  // Approximately standard normal: the Irwin-Hall sum of four 16-bit uniforms, rescaled to
  // unit variance. Bounded at +-3.46 (no outliers) and cheap enough for billions of values.
  float normal() {
    const uint64_t r = next();
    const float sum = float((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    return (sum * (1.f / 65536.f) - 2.f) * 1.7320508f;
  }
  uint64_t below(uint64_t n) { return next() % n; }  // tiny bias is irrelevant here

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace deepinfer
