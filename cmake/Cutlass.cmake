# CUTLASS (header-only, NVIDIA) for the sm_90a FP8 GEMM kernels in src/kernels/cuda/sm90a/.
# scripts/fetch_cutlass.sh (run by scripts/setup.sh when nvcc exists) unpacks the pinned headers
# into .cache/cutlass-<version>; QLM_CUTLASS_DIR points elsewhere. Without them those kernels are
# left out and the FP8 scaled-mm keeps its cuBLASLt path for large M (a status line says so).
set(QLM_CUTLASS_VERSION 4.2.0.0)
set(QLM_CUTLASS_DIR "${CMAKE_CURRENT_SOURCE_DIR}/.cache/cutlass-${QLM_CUTLASS_VERSION}" CACHE PATH
    "Directory with CUTLASS's include/ and util/include/")
set(QLM_WITH_CUTLASS OFF)
if(QLM_WITH_CUDA AND EXISTS "${QLM_CUTLASS_DIR}/include/cutlass/cutlass.h"
   AND EXISTS "${QLM_CUTLASS_DIR}/util/include/cutlass/util/packed_stride.hpp")
  set(QLM_WITH_CUTLASS ON)
  message(STATUS "qlm: CUTLASS ${QLM_CUTLASS_DIR} (sm_90a FP8 GEMM kernels on)")
elseif(QLM_WITH_CUDA)
  message(STATUS "qlm: CUTLASS headers not found in ${QLM_CUTLASS_DIR}: sm_90a FP8 GEMM kernels off "
                 "(run scripts/fetch_cutlass.sh)")
endif()

# Adds the sm_90a sources to `target`: one object library compiled for sm_90a only (wgmma and TMA
# need the arch-specific target; the rest of the CUDA code is built for CMAKE_CUDA_ARCHITECTURES).
function(qlm_add_sm90a_kernels target)
  if(NOT QLM_WITH_CUTLASS)
    return()
  endif()
  file(GLOB QLM_SM90A_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/cuda/sm90a/*.cu)
  add_library(qlm_sm90a OBJECT ${QLM_SM90A_SOURCES})
  # QLM_CUDA_FAST_COMPILE (cmake/Cuda.cmake) on our own wgmma kernels only: CUTLASS's files compile slower in that mode.
  if(QLM_CUDA_FAST_COMPILE_OPTION)
    set(QLM_SM90A_OWN_SOURCES ${QLM_SM90A_SOURCES})
    list(FILTER QLM_SM90A_OWN_SOURCES EXCLUDE REGEX "_cutlass_")
    set_source_files_properties(${QLM_SM90A_OWN_SOURCES} PROPERTIES COMPILE_OPTIONS "${QLM_CUDA_FAST_COMPILE_OPTION}")
  endif()
  set_target_properties(qlm_sm90a PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON)
  target_compile_options(qlm_sm90a PRIVATE -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr
                                           -Xcudafe --diag_suppress=177)
  # CUTLASS_ENABLE_GDC_FOR_SM90: the kernels wait on griddepcontrol before their first global read,
  # so they may be launched with programmatic dependent launch after the activation quantizer.
  target_compile_definitions(qlm_sm90a PRIVATE NDEBUG CUTLASS_ENABLE_GDC_FOR_SM90)
  target_include_directories(qlm_sm90a SYSTEM PRIVATE "${QLM_CUTLASS_DIR}/include" "${QLM_CUTLASS_DIR}/util/include")
  target_include_directories(qlm_sm90a PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/src
                                               ${CUDAToolkit_INCLUDE_DIRS})
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:qlm_sm90a>)
  target_compile_definitions(${target} PRIVATE QLM_WITH_CUTLASS=1)
endfunction()
