// Instruction sets the running CPU (and OS) really supports, detected once at run time. Kernels
// compiled for an ISA are only ever called when its flag here is true.
#pragma once

#include <string>

namespace qlm {

struct CpuFeatures {
  bool avx2_fma = false;    // AVX2 + FMA3 + F16C
  bool avx512 = false;      // AVX-512 F + BW + DQ + VL (the set our AVX-512 kernels use)
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  std::string describe() const;  // "avx512 avx512_vnni avx512_bf16 avx2_fma"
};

const CpuFeatures& cpu_features();

}  // namespace qlm
