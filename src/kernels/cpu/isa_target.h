// A region of a source file compiled for an instruction set beyond the build's baseline: every function defined
// between QLM_ISA_TARGET_BEGIN("avx2,fma") and QLM_ISA_TARGET_END carries that target (GCC: push_options + target
// pragma; clang: an attribute region applied to functions), so one binary holds the AVX2 and AVX-512 kernels and
// picks one at run time (cpu_features()).
//
// Invariant for the files that use it: headers with inline or template code are included before the region, and
// the functions inside it have internal linkage. Otherwise an inline function instantiated inside the region could
// be emitted with the wider instructions and chosen by the linker for callers on CPUs without them.
#pragma once

#define QLM_ISA_PRAGMA(text) _Pragma(#text)

#if defined(__clang__)
#define QLM_ISA_TARGET_BEGIN(isa) \
  QLM_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define QLM_ISA_TARGET_END QLM_ISA_PRAGMA(clang attribute pop)
#else
#define QLM_ISA_TARGET_BEGIN(isa) QLM_ISA_PRAGMA(GCC push_options) QLM_ISA_PRAGMA(GCC target(isa))
#define QLM_ISA_TARGET_END QLM_ISA_PRAGMA(GCC pop_options)
#endif

// GCC 12's AVX-512 intrinsics (the shifts among them) trip a false -Wmaybe-uninitialized (GCC bug 105593); the
// AVX-512 files turn it off for themselves with this, before their region.
#if defined(__clang__)
#define QLM_ISA_AVX512_WARNINGS_OFF
#else
#define QLM_ISA_AVX512_WARNINGS_OFF QLM_ISA_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")
#endif
