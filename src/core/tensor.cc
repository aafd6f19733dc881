#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/device_memory.h"
#include "core/float_convert.h"

namespace qlm {

std::string Device::str() const { return type == DeviceType::CPU ? std::string("cpu") : fmt::format("cuda:{}", index); }

// ---- Storage ----

std::shared_ptr<Storage> Storage::allocate_host(size_t nbytes) {
  auto s = std::shared_ptr<Storage>(new Storage());
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded < nbytes) fail("tensor.alloc", {}, "", "allocation of {} bytes overflows", nbytes);
  s->data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (!s->data_)
    fail("tensor.alloc", {}, "free memory or use a smaller model", "out of host memory allocating {} bytes", nbytes);
  s->nbytes_ = nbytes;
  return s;
}

std::shared_ptr<Storage> Storage::borrow(const void* data, size_t nbytes, std::shared_ptr<const void> owner,
                                         Device device) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = const_cast<std::byte*>(static_cast<const std::byte*>(data));
  s->nbytes_ = nbytes;
  s->device_ = device;
  // A borrowed storage must not free data_; an empty owner still marks it as borrowed.
  s->owner_ = owner ? std::move(owner) : std::shared_ptr<const void>(std::make_shared<int>(0));
  return s;
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  if (device.is_cpu()) return allocate_host(nbytes);
  const DeviceMemoryOps& ops = device_memory(device);
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = static_cast<std::byte*>(ops.allocate(nbytes, device.index));
  s->nbytes_ = nbytes;
  s->device_ = device;
  return s;
}

Storage::~Storage() {
  if (owner_ != nullptr) return;
  if (device_.is_cpu())
    std::free(data_);
  else
    device_memory(device_).release(data_, nbytes_, device_.index);
}

// ---- shapes ----

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t shape_numel(const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) fail("tensor.shape", {}, "", "negative dimension in shape {}", shape_str(shape));
  // An empty tensor has no elements, however large its other dims (legal in safetensors).
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      fail("tensor.shape", {}, "", "element count of shape {} overflows int64", shape_str(shape));
    n *= d;
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

// ---- Tensor ----

Tensor Tensor::empty(Shape shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  t.storage_ = Storage::allocate_host(t.nbytes());
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.storage_->data(), 0, t.storage_->nbytes());
  return t;
}

Tensor Tensor::borrow(const void* data, Shape shape, DType dtype, std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  int bits = dtype_bits(dtype);
  if (bits % 8 == 0 && reinterpret_cast<uintptr_t>(data) % (bits / 8) != 0)
    fail("tensor.misaligned", {}, "copy the bytes into an owned tensor",
         "borrowed {} data at {} is not {}-byte aligned", dtype_name(dtype), data, bits / 8);
  t.storage_ = Storage::borrow(data, t.nbytes(), std::move(owner));
  return t;
}

int64_t Tensor::size(int64_t d) const {
  if (d < 0) d += dim();
  if (d < 0 || d >= dim()) fail("tensor.dim", {}, "", "dimension {} out of range for {}", d, str());
  return shape_[static_cast<size_t>(d)];
}

size_t Tensor::nbytes() const {
  auto n = static_cast<unsigned __int128>(numel()) * static_cast<unsigned>(dtype_bits(dtype_));
  if (n % 8 != 0) fail("tensor.sub_byte", {}, "", "{} does not end on a byte boundary", str());
  n /= 8;
  if (n > std::numeric_limits<size_t>::max()) fail("tensor.shape", {}, "", "{} is too large", str());
  return static_cast<size_t>(n);
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  if (d < 0) d += dim();
  if (d < 0 || d >= dim()) fail("tensor.dim", {}, "", "narrow: dimension {} out of range for {}", d, str());
  auto du = static_cast<size_t>(d);
  if (start < 0 || length < 0 || start > shape_[du] - length)
    fail("tensor.narrow", {}, "", "narrow(dim={}, start={}, length={}) out of range for {}", d, start, length, str());
  Tensor t = *this;
  t.shape_[du] = length;
  t.offset_ += static_cast<size_t>(start * strides_[du]) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::view(Shape shape) const {
  require_contiguous("view");
  if (shape_numel(shape) != numel())
    fail("tensor.shape", {}, "", "view: shape {} has {} elements, tensor {} has {}", shape_str(shape),
         shape_numel(shape), str(), numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  return t;
}

Tensor Tensor::transpose() const {
  if (dim() != 2) fail("tensor.dim", {}, "", "transpose needs a 2-D tensor, got {}", str());
  Tensor t = *this;
  std::swap(t.shape_[0], t.shape_[1]);
  std::swap(t.strides_[0], t.strides_[1]);
  return t;
}

std::byte* Tensor::raw_data() {
  QLM_CHECK(defined());
  return storage_->data() + offset_;
}
const std::byte* Tensor::raw_data() const {
  QLM_CHECK(defined());
  return storage_->data() + offset_;
}

void Tensor::check_typed(DType expected) const {
  if (dtype_ == expected) return;
  // Unsigned integer access of a same-width dtype reads raw bits (f16 as uint16_t, fp8 as uint8_t).
  bool raw_bits =
      (expected == DType::U8 || expected == DType::U16 || expected == DType::U32 || expected == DType::U64) &&
      dtype_bits(dtype_) == dtype_bits(expected);
  if (!raw_bits) fail("tensor.dtype", {}, "", "typed access as {} to a {} tensor", dtype_name(expected), str());
}

void Tensor::require_contiguous(const char* what) const {
  if (!is_contiguous())
    fail("tensor.layout", {}, "call contiguous() first", "{} needs a contiguous tensor, got {}", what, str());
}

namespace {
double load_as_double(const std::byte* p, DType dtype) {
  auto get = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  switch (dtype) {
    case DType::F64: return get(double{});
    case DType::F32: return get(float{});
    case DType::F16: return f16_to_f32(get(uint16_t{}));
    case DType::BF16: return bf16_to_f32(get(uint16_t{}));
    case DType::F8_E4M3: return e4m3_to_f32(get(uint8_t{}));
    case DType::F8_E5M2: return e5m2_to_f32(get(uint8_t{}));
    case DType::I64: return static_cast<double>(get(int64_t{}));
    case DType::I32: return get(int32_t{});
    case DType::I16: return get(int16_t{});
    case DType::I8: return get(int8_t{});
    case DType::U8: return get(uint8_t{});
    case DType::U16: return get(uint16_t{});
    case DType::U32: return get(uint32_t{});
    case DType::U64: return static_cast<double>(get(uint64_t{}));
    case DType::BOOL: return get(uint8_t{}) != 0 ? 1.0 : 0.0;
    case DType::F4:
    case DType::F6_E2M3:
    case DType::F6_E3M2:
    case DType::F8_E8M0:
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ:
    case DType::C64: break;
  }
  fail("tensor.dtype", {}, "", "element access is not supported for dtype {}", dtype_name(dtype));
}

void store_from_double(std::byte* p, DType dtype, double v) {
  auto put = [p]<typename T>(T x) { std::memcpy(p, &x, sizeof(T)); };
  switch (dtype) {
    case DType::F64: return put(v);
    case DType::F32: return put(static_cast<float>(v));
    case DType::F16: return put(f32_to_f16(static_cast<float>(v)));
    case DType::BF16: return put(f32_to_bf16(static_cast<float>(v)));
    case DType::F8_E4M3: return put(f32_to_e4m3(static_cast<float>(v)));
    case DType::F8_E5M2: return put(f32_to_e5m2(static_cast<float>(v)));
    case DType::I64: return put(static_cast<int64_t>(v));
    case DType::I32: return put(static_cast<int32_t>(v));
    case DType::I16: return put(static_cast<int16_t>(v));
    case DType::I8: return put(static_cast<int8_t>(v));
    case DType::U8: return put(static_cast<uint8_t>(v));
    case DType::U16: return put(static_cast<uint16_t>(v));
    case DType::U32: return put(static_cast<uint32_t>(v));
    case DType::U64: return put(static_cast<uint64_t>(v));
    case DType::BOOL: return put(static_cast<uint8_t>(v != 0.0));
    case DType::F4:
    case DType::F6_E2M3:
    case DType::F6_E3M2:
    case DType::F8_E8M0:
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ:
    case DType::C64: break;
  }
  fail("tensor.dtype", {}, "", "element stores are not supported for dtype {}", dtype_name(dtype));
}

// Calls fn(byte offset of element) for every element in row-major order.
template <typename Fn>
void for_each_offset(const Shape& shape, const Shape& strides, size_t elem, Fn&& fn) {
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    fn(static_cast<size_t>(off) * elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}
}  // namespace

Tensor Tensor::clone() const {
  QLM_CHECK(defined());
  if (!on_host()) {
    if (!is_contiguous())
      fail("tensor.device", {}, "make the tensor contiguous on its device first",
           "clone of a non-contiguous {} tensor {} is not supported", device().str(), str());
    return to_device(device());
  }
  Tensor out = empty(shape_, dtype_);
  if (is_contiguous()) {
    std::memcpy(out.raw_data(), raw_data(), nbytes());
    return out;
  }
  size_t elem = dtype_size(dtype_);
  std::byte* dst = out.raw_data();
  const std::byte* src = raw_data();
  for_each_offset(shape_, strides_, elem, [&](size_t off) {
    std::memcpy(dst, src + off, elem);
    dst += elem;
  });
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType dtype) const {
  require_host("to(dtype)");
  if (dtype == dtype_) return clone();
  Tensor out = empty(shape_, dtype);
  // Widening the 16-bit floats of a contiguous tensor to F32 (checkpoint scales and weights at load):
  // the exact per-element conversion without the generic path's double round trip and dtype switch.
  if (dtype == DType::F32 && (dtype_ == DType::F16 || dtype_ == DType::BF16) && is_contiguous()) {
    const auto* src = reinterpret_cast<const uint16_t*>(raw_data());
    float* dst = out.data<float>();
    const int64_t n = numel();
    if (dtype_ == DType::F16)
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
    else
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
    return out;
  }
  size_t in_elem = dtype_size(dtype_), out_elem = dtype_size(dtype);
  std::byte* dst = out.raw_data();
  const std::byte* src = raw_data();
  for_each_offset(shape_, strides_, in_elem, [&](size_t off) {
    store_from_double(dst, dtype, load_as_double(src + off, dtype_));
    dst += out_elem;
  });
  return out;
}

double Tensor::item_as_double(std::span<const int64_t> index) const {
  require_host("item_as_double");
  if (static_cast<int64_t>(index.size()) != dim())
    fail("tensor.index", {}, "", "{} indices for {}", index.size(), str());
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= shape_[d])
      fail("tensor.index", {}, "", "index {} out of range for {}", index[d], str());
    off += index[d] * strides_[d];
  }
  return load_as_double(raw_data() + static_cast<size_t>(off) * dtype_size(dtype_), dtype_);
}

std::vector<float> Tensor::to_float_vector() const {
  require_host("to_float_vector");
  std::vector<float> out;
  out.reserve(static_cast<size_t>(numel()));
  size_t elem = dtype_size(dtype_);
  const std::byte* src = raw_data();
  for_each_offset(shape_, strides_, elem,
                  [&](size_t off) { out.push_back(static_cast<float>(load_as_double(src + off, dtype_))); });
  return out;
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  if (device.is_cpu()) return empty(std::move(shape), dtype);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  t.storage_ = Storage::allocate(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  if (device.is_cpu()) return zeros(std::move(shape), dtype);
  Tensor t = empty(std::move(shape), dtype, device);
  if (t.nbytes() > 0) device_memory(device).zero(t.raw_data(), t.nbytes(), device.index);
  return t;
}

Tensor Tensor::to_device(Device target) const {
  QLM_CHECK(defined());
  const Tensor src = on_host() ? contiguous() : *this;
  if (!src.is_contiguous())
    fail("tensor.device", {}, "make the tensor contiguous on its device first",
         "copy of a non-contiguous {} tensor {} is not supported", device().str(), str());
  Tensor out = empty(shape_, dtype_, target);
  copy_tensor_bytes(out, src);
  return out;
}

void Tensor::require_host(const char* what) const {
  if (defined() && !on_host())
    fail("tensor.device", {}, "copy the tensor to the host first (to_device(Device::cpu()))",
         "{} needs a host tensor; {} lives on {}", what, str(), device().str());
}

std::string Tensor::str() const { return fmt::format("{}{}", dtype_name(dtype_), shape_str(shape_)); }

}  // namespace qlm
