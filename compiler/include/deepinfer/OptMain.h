// deepinfer-opt's entry point (MlirOptMain with the di dialect and passes registered).
#pragma once
namespace deepinfer {
int runOptMain(int argc, char** argv);
}
