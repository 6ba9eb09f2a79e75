import os
import lit.formats

config.name = "deepinfer-jit"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.di_obj_root, "tests", "lit")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]
config.environment["PATH"] = os.pathsep.join(
    [config.di_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# Keep tests hermetic: no GPU is assumed and the kernel cache goes to a scratch folder.
config.environment["DEEPINFER_JIT_CACHE_DIR"] = os.path.join(config.test_exec_root, "cache")
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%{di_tools}", config.di_tools_dir))
config.substitutions.append(("%{di_obj}", config.di_obj_root))
