// Helpers for the model I/O tests: a scratch folder under ::testing::TempDir() that is removed
// afterwards, and raw file writers for building malformed inputs byte by byte.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace deepinfer::testing_util {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::path(::testing::TempDir()) /
             fmt::format("di_model_{}_{}_{}", tag, ::getpid(), counter++))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline void writeText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

inline std::string readText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline std::vector<uint8_t> readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A safetensors file from a literal header and `dataBytes` bytes of data (filled with a
// pattern), with an optional override of the 8-byte header length.
inline void writeRawSafetensors(const std::string& path, const std::string& header, size_t dataBytes,
                                int64_t headerLenOverride = -1) {
  std::vector<uint8_t> out(8);
  const uint64_t len = headerLenOverride >= 0 ? uint64_t(headerLenOverride) : header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(len >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < dataBytes; ++i) out.push_back(uint8_t(i * 7 + 3));
  writeBytes(path, out);
}

// Expects `r` to be an error whose message contains every one of `parts`.
template <class R>
::testing::AssertionResult failsWith(const R& r, std::initializer_list<const char*> parts) {
  if (r.ok()) return ::testing::AssertionFailure() << "expected an error, got success";
  for (const char* p : parts)
    if (r.error().message.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "error '" << r.error().message << "' does not mention '" << p << "'";
  return ::testing::AssertionSuccess();
}

}  // namespace deepinfer::testing_util
