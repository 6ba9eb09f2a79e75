// The tiny preset (make-model) written to a temporary directory of this process, and the parts of
// a whole-model GPU test environment that GpuModel, GpuSpeculative and GpuPipeline tests share.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "GpuTestDevice.h"
#include "deepinfer/Error.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"
#include "model/gpu/GpuModel.h"

namespace deepinfer::testing_util {

// `tag` keeps the files of different test files apart (they may run in one process).
inline Result<std::string> makeTinyModelDir(const std::string& tag) {
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / fmt::format("di_gpu_{}_{}", tag, ::getpid())).string();
  MakeModelOptions mo;
  mo.preset = "tiny";
  mo.outDir = dir;
  if (auto st = makeModel(mo); !st.ok()) return Error{"make-model tiny: " + st.error().message};
  return dir;
}

// What every whole-model test file keeps: the device (null when its tests skip), why it is null,
// the tiny model's directory and the run's seed.
struct TinyModelEnv {
  std::shared_ptr<Device> dev;
  std::string why, dir;
  uint64_t seed = 0;

  // Opens the test device and writes the tiny preset; false (with `why`) when either is missing.
  bool open(const std::string& tag) {
    const auto& g = gpuTestDevice();
    seed = g.seed;
    if (!g.dev) {
      why = g.why;
      return false;
    }
    dev = g.dev;
    auto d = makeTinyModelDir(tag);
    if (!d.ok()) return drop(d.error().message);
    dir = *d;
    return true;
  }
  // The CPU reference model of the tiny preset, or null (the device dropped with the reason).
  std::unique_ptr<CpuModel> loadCpu() {
    auto cpu = CpuModel::load(dir);
    if (!cpu.ok()) {
      drop("cpu model: " + cpu.error().message);
      return nullptr;
    }
    return std::move(*cpu);
  }
  // A GPU model of the tiny preset, or null: with a GPU present that is a test failure, and the
  // device is dropped so the file's tests skip with the reason instead of crashing.
  std::unique_ptr<GpuModel> loadGpu(const GpuModelOptions& go) {
    auto gpu = GpuModel::load(dir, dev, go);
    if (!gpu.ok()) {
      drop("gpu model: " + gpu.error().message);
      ADD_FAILURE() << why;
      return nullptr;
    }
    return std::move(*gpu);
  }
  bool drop(std::string reason) {
    why = std::move(reason);
    dev.reset();
    return false;
  }
};

// n token ids drawn uniformly from [0, V) by a generator seeded with `seed`.
inline std::vector<int32_t> randomIds(int64_t n, uint64_t seed, int64_t V) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint64_t(V));
  return ids;
}

}  // namespace deepinfer::testing_util
