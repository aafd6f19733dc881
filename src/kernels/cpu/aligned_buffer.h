// A fixed-size, 64-byte aligned, uninitialised array for packed weights and kernel scratch.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace qlm {

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { resize(count); }

  // Discards the contents; the new elements are uninitialised.
  void resize(size_t count) {
    if (count == size_) return;
    data_.reset();
    size_ = 0;
    if (count == 0) return;
    size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<T*>(p));
    size_ = count;
  }
  // Grows (never shrinks) to at least `count` elements; contents are lost when it grows.
  T* reserve(size_t count) {
    if (count > size_) resize(count);
    return data_.get();
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> data_;
  size_t size_ = 0;
};

}  // namespace qlm
