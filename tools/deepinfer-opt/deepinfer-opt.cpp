// mlir-opt for the `di` dialect: parses, verifies and runs the dialect's passes.
#include "deepinfer/OptMain.h"

int main(int argc, char** argv) { return deepinfer::runOptMain(argc, argv); }
