// 2-D TMA tensor maps (CUtensorMap) of 16-bit row-major matrices for the bulk-tensor copies of the sm_90
// kernels (cp.async.bulk.tensor: bulk_pipeline.cuh's tensor_load_2d). The driver's encoder is found at run
// time (cudaGetDriverEntryPointByVersion), so nothing links libcuda. Only for QLM_WITH_CUDA builds.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace qlm::cuda {

// Whether the driver has cuTensorMapEncodeTiled (CUDA 12+ drivers).
bool tensor_maps_available();

// The map of a [rows][row_stride_elems] 16-bit matrix whose first `cols` columns are used, in boxes of
// box_cols x box_rows elements (box_cols * 2 a multiple of 16, both at most 256); elements outside
// cols x rows arrive as zeros. A row holds at most row_stride_elems columns: columns asked beyond it (a kernel's
// padded k extent over an x of K columns) read as zeros too, never the next row. False (map unusable) when the driver
// lacks the encoder, `base` is not 16-byte aligned, the row stride is not a multiple of 16 bytes, or the driver refuses
// the shape.
bool encode_u16_tensor_map(CUtensorMap* map, const void* base, uint64_t cols, uint64_t rows, int64_t row_stride_elems,
                           uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle);

}  // namespace qlm::cuda
