# Link LLVM and MLIR statically. Debian's MLIR targets link an imported target named `LLVM`
# (the 129 MB libLLVM.so); point it at the static component libraries instead so the
# binaries carry no LLVM/MLIR shared library and run on a GPU machine without MLIR.
set(DI_LLVM_COMPONENTS support demangle targetparser bitstreamreader bitreader bitwriter core
    binaryformat remarks asmparser irreader frontendopenmp transformutils analysis profiledata
    object mc mcparser textapi irprinter option)
llvm_map_components_to_libnames(DI_LLVM_STATIC_LIBS ${DI_LLVM_COMPONENTS})

get_target_property(_di_llvm_configs LLVM IMPORTED_CONFIGURATIONS)
set(_di_support "${LLVM_LIBRARY_DIR}/libLLVMSupport.a")
foreach(_cfg IN LISTS _di_llvm_configs)
  set_target_properties(LLVM PROPERTIES IMPORTED_LOCATION_${_cfg} "${_di_support}")
endforeach()
set_target_properties(LLVM PROPERTIES
  IMPORTED_LOCATION "${_di_support}"
  IMPORTED_NO_SONAME TRUE
  INTERFACE_LINK_LIBRARIES "${DI_LLVM_STATIC_LIBS};${DI_LLVM_STATIC_LIBS}")

# LLVMSupport's exported interface names libz3.so (only the static analyzer's solver uses it)
# and the shared zstd; neither is needed by MLIR and neither exists on the GPU machine.
set_target_properties(LLVMSupport PROPERTIES
  INTERFACE_LINK_LIBRARIES "rt;dl;m;pthread;LLVMDemangle")
