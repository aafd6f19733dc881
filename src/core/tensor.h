// Tensor: shape, strides, dtype, device over owning or borrowed (mmap) storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace qlm {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

// Bytes a tensor's elements live in. Host storage is 64-byte aligned; borrowed storage points into
// memory someone else owns (an mmap'ed file) and keeps that owner alive.
class Storage {
 public:
  static std::shared_ptr<Storage> allocate_host(size_t nbytes);
  // Host memory for Device::cpu(), else memory of the device's registered backend
  // (core/device_memory.h); "device.unavailable" when the build or machine has none.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  static std::shared_ptr<Storage> borrow(const void* data, size_t nbytes, std::shared_ptr<const void> owner,
                                         Device device = Device::cpu());
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool owned() const { return owner_ == nullptr; }

 private:
  Storage() = default;
  std::byte* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::shared_ptr<const void> owner_;  // null when this storage owns data_
};

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);
// Product of dims; throws on negative dims or int64 overflow.
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() is false

  // New contiguous host tensor, zero-filled.
  static Tensor zeros(Shape shape, DType dtype);
  // New contiguous host tensor, uninitialised.
  static Tensor empty(Shape shape, DType dtype);
  // New contiguous tensor on `device`: uninitialised, or zero-filled.
  static Tensor empty(Shape shape, DType dtype, Device device);
  static Tensor zeros(Shape shape, DType dtype, Device device);
  // Contiguous view of borrowed bytes. `data` must be aligned to the element size (callers copy
  // misaligned data instead); sub-byte dtypes are allowed as whole-tensor views.
  static Tensor borrow(const void* data, Shape shape, DType dtype, std::shared_ptr<const void> owner);
  // Copy of typed host data.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape, DType dtype = DTypeOf<T>::value);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const;  // bytes of the elements (numel * bits / 8)
  bool is_contiguous() const;
  bool is_borrowed() const { return storage_ && !storage_->owned(); }

  // View of rows [start, start+length) along `d` (tensor-parallel slicing); shares storage.
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  // View with a new shape; requires a contiguous tensor and the same element count.
  Tensor view(Shape shape) const;
  // View with dims 0 and 1 swapped (2-D only).
  Tensor transpose() const;
  // Contiguous, owned copy (also of a contiguous tensor). Device tensors must be contiguous.
  Tensor clone() const;
  // Contiguous copy on `device` (this tensor's bytes, unchanged).
  Tensor to_device(Device device) const;
  bool on_host() const { return device().is_cpu(); }
  // This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  // Element-wise conversion between float types (F64/F32/F16/BF16/F8) and between integer types;
  // returns a contiguous owned tensor. Host tensors only (as are span, item_as_double and
  // to_float_vector); device tensors give "tensor.device".
  Tensor to(DType dtype) const;

  // Raw access. data_ptr() is the first element; requires whole-byte elements for offsets.
  std::byte* raw_data();
  const std::byte* raw_data() const;
  template <typename T>
  T* data() {
    check_typed(DTypeOf<T>::value);
    return reinterpret_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    check_typed(DTypeOf<T>::value);
    return reinterpret_cast<const T*>(raw_data());
  }
  // Contiguous typed span of all elements.
  template <typename T>
  std::span<const T> span() const {
    require_host("span");
    require_contiguous("span");
    return {data<T>(), static_cast<size_t>(numel())};
  }
  template <typename T>
  std::span<T> span() {
    require_host("span");
    require_contiguous("span");
    return {data<T>(), static_cast<size_t>(numel())};
  }
  // Element as double, any float or integer dtype, any strides (slow; for tests and checks).
  double item_as_double(std::span<const int64_t> index) const;
  // Reads every element converted to float (any float dtype) or to double, in row-major order.
  std::vector<float> to_float_vector() const;

  std::string str() const;  // "BF16[4096, 128]"

 private:
  void check_typed(DType expected) const;
  void require_contiguous(const char* what) const;
  void require_host(const char* what) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes from storage start to element 0
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::F32;
};

Shape contiguous_strides(const Shape& shape);

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  if (static_cast<size_t>(t.numel()) != values.size())
    fail("tensor.shape", {}, "", "from_vector: {} values for shape {}", values.size(), shape_str(t.shape()));
  QLM_CHECK(dtype_size(dtype) == sizeof(T));
  std::copy(values.begin(), values.end(), reinterpret_cast<T*>(t.raw_data()));
  return t;
}

}  // namespace qlm
