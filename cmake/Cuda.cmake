# QLM_CUDA=AUTO builds the CUDA sources when nvcc is found (also in /usr/local/cuda).
set(QLM_WITH_CUDA OFF)
set(QLM_WITH_CUDA OFF CACHE INTERNAL "CUDA backend built")
if(NOT QLM_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(QLM_NVCC nvcc HINTS /usr/local/cuda/bin)
    if(QLM_NVCC)
      set(CMAKE_CUDA_COMPILER ${QLM_NVCC})
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    # -gencode for sm_80 and sm_90 (CMake turns each entry into one -gencode pair).
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures")
    enable_language(CUDA)
    # CMake 3.25 has no CUDA20 dialect for nvcc; CUDA sources are C++17 and include no C++20 headers.
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    set(QLM_WITH_CUDA ON)
    set(QLM_WITH_CUDA ON CACHE INTERNAL "CUDA backend built")
    # NCCL (multi-GPU tensor parallelism) when the toolkit or the system has it.
    find_path(QLM_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(QLM_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib /usr/local/cuda/lib64)
    if(QLM_NCCL_INCLUDE AND QLM_NCCL_LIBRARY)
      set(QLM_WITH_NCCL ON)
      message(STATUS "qlm: NCCL ${QLM_NCCL_LIBRARY}")
    else()
      set(QLM_WITH_NCCL OFF)
      message(STATUS "qlm: NCCL not found; multi-GPU tensor parallelism disabled")
    endif()
    message(STATUS "qlm: CUDA backend ON (${CMAKE_CUDA_COMPILER}, archs ${CMAKE_CUDA_ARCHITECTURES})")
    # A compile check only (CI has no GPU: .ci/run turns it on): nvcc's fast-compile mode skips most device-code
    # optimization (attention.cu 151 -> 9 s for two architectures, a wgmma tile file 118 -> 6 s), so every CUDA
    # source is still parsed, instantiated, lowered to PTX and assembled, but the kernels are not the ones to run or
    # time (scripts/device_bundle.sh builds without it). QLM_CUDA_FAST_COMPILE_OPTION holds the flag for the targets
    # to apply (qlm_engine; the sm_90a kernels except CUTLASS's, whose front end dominates and which the mode makes
    # 3x slower).
    option(QLM_CUDA_FAST_COMPILE "Compile device code unoptimized (nvcc --Ofast-compile=max): a compile check" OFF)
    set(QLM_CUDA_FAST_COMPILE_OPTION "")
    if(QLM_CUDA_FAST_COMPILE)
      if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.8)
        message(STATUS "qlm: QLM_CUDA_FAST_COMPILE needs nvcc >= 12.8 (found ${CMAKE_CUDA_COMPILER_VERSION}); ignored")
      else()
        set(QLM_CUDA_FAST_COMPILE_OPTION "--Ofast-compile=max")
        message(STATUS "qlm: CUDA device code compiled in fast-compile mode (a compile check: not for GPU runs)")
      endif()
    endif()
  elseif(QLM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "QLM_CUDA=ON but nvcc was not found; install the CUDA toolkit or use -DQLM_CUDA=OFF")
  else()
    message(STATUS "qlm: CUDA backend OFF (nvcc not found)")
  endif()
endif()
