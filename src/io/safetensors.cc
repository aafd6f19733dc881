// Reader: validates R1-R18 of RELIABILITY.md §B.1 in file order (length prefix, header text, each
// entry, then the layout of the byte buffer) before any tensor byte is read.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

#include "io/guarded_json.h"
#include "io/mapped_file.h"
#include "io/utf8.h"

namespace qlm::io {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxDim = (uint64_t{1} << 48) - 1;  // schema cap on each dimension (R9)
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kRemedyRedownload = "the file is truncated or corrupt: re-download it";
constexpr std::string_view kRemedyRewrite = "re-export the checkpoint with a conforming safetensors writer";

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

uint64_t read_le_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

// Everything parse() needs to name in its errors.
struct Validator {
  const std::string& source;

  ErrorContext at(std::string_view tensor = {}) const { return ErrorContext{source, std::string(tensor), ""}; }

  std::map<std::string, std::string> metadata(const json& value) const {
    if (!value.is_object())
      fail("safetensors.metadata", at(), std::string(kRemedyRewrite),
           "__metadata__ must be an object of string values, found {} {}", json_kind(value), json_excerpt(value));
    bool looks_like_tensor = value.contains("dtype") && value.contains("shape") && value.contains("data_offsets");
    std::map<std::string, std::string> out;
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        if (looks_like_tensor)
          fail("safetensors.metadata", at(std::string(kMetadataKey)), std::string(kRemedyRewrite),
               "__metadata__ is reserved for string metadata and can never be a tensor name");
        fail("safetensors.metadata", at(), std::string(kRemedyRewrite),
             "__metadata__ value '{}' must be a string, found {} {} (arbitrary JSON is not allowed)", key,
             json_kind(item), json_excerpt(item));
      }
      out.emplace(key, item.get<std::string>());
    }
    return out;
  }

  // A JSON non-negative integer; anything else (float, negative, string, bool, array) is rejected.
  uint64_t unsigned_field(const json& value, const std::string& tensor, std::string_view code,
                          std::string_view what) const {
    if (!value.is_number_unsigned())
      fail(std::string(code), at(tensor), std::string(kRemedyRewrite),
           "{} must be a non-negative JSON integer, found {} {}", what, json_kind(value), json_excerpt(value));
    return value.get<uint64_t>();
  }

  TensorInfo entry(const std::string& name, const json& value) const {
    // R7: exactly dtype, shape, data_offsets.
    if (!value.is_object())
      fail("safetensors.entry", at(name), std::string(kRemedyRewrite),
           "entry must be an object with dtype, shape and data_offsets, found {} {}", json_kind(value),
           json_excerpt(value));
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field))
        fail("safetensors.entry", at(name), std::string(kRemedyRewrite),
             "entry is missing the required field '{}' (expected dtype, shape, data_offsets)", field);
    for (const auto& [key, item] : value.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        fail("safetensors.entry", at(name), std::string(kRemedyRewrite),
             "entry has an unexpected field '{}' (only dtype, shape, data_offsets are allowed)", key);

    TensorInfo info;
    info.name = name;

    // R8
    const json& dtype = value.at("dtype");
    if (!dtype.is_string())
      fail("safetensors.dtype", at(name), std::string(kRemedyRewrite), "dtype must be a string, found {} {}",
           json_kind(dtype), json_excerpt(dtype));
    auto parsed = dtype_from_name(dtype.get<std::string>());
    if (!parsed)
      fail("safetensors.dtype", at(name), std::string(kRemedyRewrite),
           "unknown dtype {} (expected an exact safetensors name such as F16, BF16, F8_E4M3, I32, U8)",
           json_excerpt(dtype));
    info.dtype = *parsed;

    // R9
    const json& shape = value.at("shape");
    if (!shape.is_array())
      fail("safetensors.shape", at(name), std::string(kRemedyRewrite),
           "shape must be an array of non-negative integers, found {} {}", json_kind(shape), json_excerpt(shape));
    bool has_zero_dim = false;
    for (size_t d = 0; d < shape.size(); ++d) {
      uint64_t dim = unsigned_field(shape[d], name, "safetensors.shape", fmt::format("shape[{}]", d));
      if (dim > kMaxDim)
        fail("safetensors.shape", at(name), std::string(kRemedyRewrite),
             "shape[{}] = {} exceeds the maximum dimension 2^48-1 = {}", d, dim, kMaxDim);
      has_zero_dim = has_zero_dim || dim == 0;
      info.shape.push_back(static_cast<int64_t>(dim));
    }

    // R10: element count and bit count with overflow checks. A zero dimension makes the tensor
    // empty whatever the other dims are.
    uint64_t elements = 1;
    if (has_zero_dim) {
      elements = 0;
    } else {
      for (int64_t dim : info.shape)
        if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dim), &elements))
          fail("safetensors.overflow", at(name), std::string(kRemedyRewrite),
               "the element count of shape {} overflows 64 bits", shape_str(info.shape));
    }
    const auto bits_per_element = static_cast<uint64_t>(dtype_bits(info.dtype));
    uint64_t bits = 0;
    if (__builtin_mul_overflow(elements, bits_per_element, &bits))
      fail("safetensors.overflow", at(name), std::string(kRemedyRewrite),
           "{} elements x {} bits ({}) overflows 64 bits", elements, bits_per_element, dtype_name(info.dtype));
    // R11
    if (bits % 8 != 0)
      fail("safetensors.sub_byte", at(name), std::string(kRemedyRewrite),
           "{} elements of {} ({} bits each) are {} bits, which does not end on a byte boundary", elements,
           dtype_name(info.dtype), bits_per_element, bits);
    const uint64_t expected_bytes = bits / 8;

    // R12
    const json& offsets = value.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2)
      fail("safetensors.offsets", at(name), std::string(kRemedyRewrite),
           "data_offsets must be an array [begin, end] of two non-negative integers, found {}",
           json_excerpt(offsets));
    info.begin = unsigned_field(offsets[0], name, "safetensors.offsets", "data_offsets[0] (begin)");
    info.end = unsigned_field(offsets[1], name, "safetensors.offsets", "data_offsets[1] (end)");
    if (info.begin > info.end)
      fail("safetensors.offsets", at(name), std::string(kRemedyRewrite),
           "data_offsets begin {} is greater than end {}", info.begin, info.end);
    if (info.end - info.begin != expected_bytes)
      fail("safetensors.offsets", at(name), std::string(kRemedyRewrite),
           "data_offsets [{}, {}] span {} bytes, but {}{} needs {} bytes", info.begin, info.end,
           info.end - info.begin, dtype_name(info.dtype), shape_str(info.shape), expected_bytes);
    return info;
  }

  // R13 + R14 over tensors sorted by (begin, end).
  void layout(const std::vector<TensorInfo>& tensors, uint64_t buffer_size, uint64_t data_start) const {
    uint64_t expected_begin = 0;
    const TensorInfo* previous = nullptr;
    for (const TensorInfo& t : tensors) {
      if (t.begin != expected_begin) {
        if (previous == nullptr)
          fail("safetensors.gap_or_overlap", at(t.name), std::string(kRemedyRewrite),
               "the first tensor by offset starts at byte {} of the data buffer, expected 0 ({} unused bytes)",
               t.begin, t.begin);
        if (t.begin > expected_begin)
          fail("safetensors.gap_or_overlap", at(t.name), std::string(kRemedyRewrite),
               "gap of {} bytes: this tensor starts at {} but the previous tensor '{}' ends at {}",
               t.begin - expected_begin, t.begin, previous->name, expected_begin);
        if (t.begin == previous->begin && t.end == previous->end)
          fail("safetensors.gap_or_overlap", at(t.name), std::string(kRemedyRewrite),
               "aliasing: this tensor and '{}' claim the same bytes [{}, {}]; every byte must have a single owner",
               previous->name, t.begin, t.end);
        fail("safetensors.gap_or_overlap", at(t.name), std::string(kRemedyRewrite),
             "overlap: this tensor [{}, {}] overlaps '{}' [{}, {}]", t.begin, t.end, previous->name,
             previous->begin, previous->end);
      }
      expected_begin = t.end;
      previous = &t;
    }
    if (expected_begin > buffer_size)
      fail("safetensors.coverage", at(previous->name), std::string(kRemedyRedownload),
           "the file is truncated: the header describes {} bytes of tensor data (file size {}), but only {} "
           "bytes follow the header (file size {})",
           expected_begin, data_start + expected_begin, buffer_size, data_start + buffer_size);
    if (expected_begin < buffer_size)
      fail("safetensors.coverage", at(), std::string(kRemedyRewrite),
           "{} trailing bytes after the last tensor: tensor data ends at file offset {} but the file has {} "
           "bytes (the file is not fully covered; appended data such as a zip or pickle makes a polyglot file)",
           buffer_size - expected_begin, data_start + expected_begin, data_start + buffer_size);
  }
};

}  // namespace

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string source_name) {
  SafetensorsFile file;
  file.source_name_ = std::move(source_name);
  file.bytes_ = bytes;
  const Validator check{file.source_name_};

  // R1
  if (bytes.size() < 8)
    fail("safetensors.too_small", check.at(), std::string(kRemedyRedownload),
         "the file has {} bytes; a safetensors file has at least 8 (the header length)", bytes.size());
  // R2 before anything is allocated.
  const uint64_t header_size = read_le_u64(bytes.data());
  if (header_size > kMaxHeaderBytes)
    fail("safetensors.header_too_large", check.at(), "this is not a safetensors file, or it is corrupt",
         "the header length is {} bytes, above the limit of {} bytes", header_size, kMaxHeaderBytes);
  // R3
  uint64_t data_start = 0;
  if (__builtin_add_overflow(uint64_t{8}, header_size, &data_start) || data_start > bytes.size())
    fail("safetensors.header_length", check.at(), std::string(kRemedyRedownload),
         "the header length {} needs a file of at least {} bytes, but the file has {}", header_size,
         8 + header_size, bytes.size());
  file.header_size_ = header_size;
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), header_size);

  // R4
  if (auto bad = first_invalid_utf8(header))
    fail("safetensors.utf8", check.at(), std::string(kRemedyRewrite),
         "the header is not valid UTF-8: invalid byte 0x{:02X} at header offset {}",
         static_cast<unsigned>(static_cast<unsigned char>(header[*bad])), *bad);

  // R5: JSON whitespace may pad either side; anything else is a JSON error.
  size_t first = 0, last = header.size();
  while (first < last && is_json_space(header[first])) ++first;
  while (last > first && is_json_space(header[last - 1])) --last;
  if (first == last)
    fail("safetensors.json", check.at(), std::string(kRemedyRewrite),
         "the header ({} bytes) is empty or only whitespace; expected a JSON object", header.size());
  auto parsed = parse_guarded_json(header.substr(first, last - first));
  if (auto* failure = std::get_if<JsonFailure>(&parsed)) {
    switch (failure->kind) {
      case JsonFailure::Kind::duplicate_key:
        // R15
        if (failure->key_path.empty())
          fail("safetensors.duplicate_key", check.at(failure->detail), std::string(kRemedyRewrite),
               "duplicate tensor name '{}' in the header (JSON keys must be unique)", failure->detail);
        fail("safetensors.duplicate_key", check.at(), std::string(kRemedyRewrite),
             "duplicate key '{}' inside '{}' in the header (JSON keys must be unique)", failure->detail,
             failure->key_path);
      case JsonFailure::Kind::too_deep:
        fail("safetensors.too_deep", check.at(), std::string(kRemedyRewrite), "the header has {}",
             failure->detail);
      case JsonFailure::Kind::syntax: {
        const size_t offset = first + (failure->byte_position > 0 ? failure->byte_position - 1 : 0);
        if (offset < header.size() && header[offset] == '\0')
          fail("safetensors.json", check.at(), std::string(kRemedyRewrite),
               "NUL byte at header offset {}; only JSON whitespace may pad the header", offset);
        fail("safetensors.json", check.at(), std::string(kRemedyRewrite), "the header is not valid JSON: {}",
             failure->detail);
      }
    }
  }
  const json& root = std::get<json>(parsed);
  if (!root.is_object())
    fail("safetensors.not_object", check.at(), std::string(kRemedyRewrite),
         "the header must be a JSON object, found {} {}", json_kind(root), json_excerpt(root));

  // R6-R12 per entry.
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      file.metadata_ = check.metadata(value);
      continue;
    }
    file.tensors_.push_back(check.entry(key, value));
  }
  // R13, R14
  std::sort(file.tensors_.begin(), file.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  check.layout(file.tensors_, bytes.size() - data_start, data_start);

  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_.emplace(file.tensors_[i].name, i);
  return file;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto mapping = MappedFile::open(path);
  // R18: everything is validated against the fstat size the mapping was made with.
  SafetensorsFile file = parse(mapping->bytes(), path.string());
  file.mapping_ = std::move(mapping);
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
  const TensorInfo* found = find(name);
  if (found == nullptr)
    fail("safetensors.missing_tensor", ErrorContext{source_name_, std::string(name), ""}, "",
         "no tensor of this name in the file ({} tensors)", tensors_.size());
  return *found;
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& info) const {
  const uint64_t data_start = 8 + header_size_;
  const uint64_t buffer = bytes_.size() >= data_start ? bytes_.size() - data_start : 0;
  // Guards against a TensorInfo that came from another file (or a default-constructed object).
  if (info.begin > info.end || info.end > buffer || bytes_.size() < data_start)
    fail("safetensors.offsets", ErrorContext{source_name_, info.name, ""}, "",
         "data_offsets [{}, {}] lie outside this file's {}-byte data buffer", info.begin, info.end, buffer);
  return bytes_.subspan(data_start + info.begin, info.end - info.begin);
}

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const TensorInfo& meta = info(name);
  std::span<const std::byte> bytes = data(meta);
  const int bits = dtype_bits(meta.dtype);
  const uintptr_t alignment = bits % 8 == 0 ? static_cast<uintptr_t>(bits / 8) : 1;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignment == 0)
    return Tensor::borrow(bytes.data(), meta.shape, meta.dtype, std::static_pointer_cast<const void>(mapping_));
  // R17: a misaligned tensor is copied into aligned storage instead of being cast.
  Tensor copy = Tensor::empty(meta.shape, meta.dtype);
  std::memcpy(copy.raw_data(), bytes.data(), bytes.size());
  return copy;
}

}  // namespace qlm::io
