// Host-side pieces the emulator tests share: buffers aligned like device allocations, and reading
// which instantiation an emitted unit calls (so a test runs the kernel the family emitted).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::emu_test {

// A host buffer with an address aligned like a device allocation, filled with `fill` (poison).
struct Buffer {
  std::vector<uint8_t> bytes;
  uint8_t* data = nullptr;
  explicit Buffer(size_t n, uint8_t fill) : bytes(n + 256, fill) {
    data = bytes.data() + (256 - reinterpret_cast<uintptr_t>(bytes.data()) % 256) % 256;
  }
};

// The template arguments of `call<` in the emitted unit (e.g. "di::moe::w13<"); "" when absent.
inline std::string templateArgs(const std::string& source, const std::string& call) {
  const size_t at = source.find(call);
  if (at == std::string::npos) return "";
  const size_t b = at + call.size(), e = source.find(">(p)", b);
  return source.substr(b, e - b);
}

}  // namespace deepinfer::emu_test
