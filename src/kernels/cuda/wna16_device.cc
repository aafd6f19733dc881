#include "kernels/cuda/wna16_device.h"

#ifdef QLM_WITH_CUDA
namespace qlm {

Wna16DeviceLayout upload_wna16_layout(const CudaWna16Layout& L, Device device) {
  Wna16DeviceLayout d;
  d.codes = Tensor::from_vector(L.codes, {static_cast<int64_t>(L.codes.size())}).to_device(device);
  d.scales = Tensor::from_vector(L.scales, {L.groups, L.N_pad}).to_device(device);
  if (!L.zeros.empty()) d.zeros = Tensor::from_vector(L.zeros, {L.groups, L.N_pad}).to_device(device);
  d.row_source = Tensor::from_vector(L.row_source, {L.rows}).to_device(device);
  d.chunk_group = Tensor::from_vector(L.chunk_group, {L.chunks}).to_device(device);
  cuda::Wna16DeviceWeights& w = d.view;
  w.codes = d.codes.data<uint32_t>();
  w.scales = d.scales.data<float>();
  w.zeros = d.zeros.defined() ? d.zeros.data<uint8_t>() : nullptr;
  w.row_source = d.row_source.data<int32_t>();
  w.chunk_group = d.chunk_group.data<int32_t>();
  w.bits = L.bits;
  w.implied_zero = L.implied_zero;
  w.K = L.K;
  w.N = L.N;
  w.N_pad = L.N_pad;
  w.rows = L.rows;
  w.chunks = L.chunks;
  return d;
}

}  // namespace qlm
#endif
