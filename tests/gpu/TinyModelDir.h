// The tiny preset (make-model) written to a temporary directory of this process, for the GPU
// tests that load a whole model (GpuModel, GpuSpeculative, GpuPipeline).
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "deepinfer/Error.h"
#include "model/MakeModel.h"

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

}  // namespace deepinfer::testing_util
