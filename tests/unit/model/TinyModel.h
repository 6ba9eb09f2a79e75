// The `tiny` preset as a CPU model, shared by the model tests of the unit binary: made on first
// use (not at start-up: CTest runs every test of the shared binary in its own process) and removed
// at exit; and random prompts.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/CpuForward.h"
#include "model/MakeModel.h"

namespace deepinfer::testing_tiny {

struct TinyModel {
  std::string dir;
  std::unique_ptr<CpuModel> model;
  std::string error;
  TinyModel() {
    dir = std::filesystem::path(::testing::TempDir()) / fmt::format("cpu_tiny_{}", ::getpid());
    MakeModelOptions o;
    o.preset = "tiny";
    o.outDir = dir;
    o.seed = 1;
    if (Status st = makeModel(o); !st.ok()) {
      error = "make-model tiny: " + st.error().message;
      return;
    }
    auto m = CpuModel::load(dir, CpuModelOptions{2, false});
    if (!m.ok()) {
      error = "load tiny: " + m.error().message;
      return;
    }
    model = std::move(*m);
  }
  ~TinyModel() {
    model.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

inline TinyModel& tinyModel() {
  static TinyModel t;
  return t;
}

inline std::vector<int32_t> randomPrompt(int64_t n, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> ud(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = ud(rng);
  return ids;
}

}  // namespace deepinfer::testing_tiny
