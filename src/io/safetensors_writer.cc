// Writer: header entries sorted by name, data ordered by (element alignment descending, name) so
// that, with the header padded to a multiple of 8, every tensor starts aligned for its dtype.
#include <algorithm>
#include <array>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace qlm::io {
namespace {

struct PlannedTensor {
  const std::string* name;
  Tensor contiguous;
};

struct WritePlan {
  std::string header;  // padded JSON, without the 8-byte length
  std::vector<PlannedTensor> data_order;
  uint64_t data_bytes = 0;
};

size_t element_alignment(DType dtype) {
  const int bits = dtype_bits(dtype);
  return bits % 8 == 0 ? static_cast<size_t>(bits / 8) : 1;
}

WritePlan plan_write(const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata, const std::string& target) {
  WritePlan plan;
  std::set<std::string_view> seen;
  for (const auto& [name, tensor] : tensors) {
    const ErrorContext where{target, name, ""};
    if (name == "__metadata__")
      fail("safetensors.metadata", where, "rename the tensor", "__metadata__ is reserved and cannot be a tensor name");
    if (!seen.insert(name).second)
      fail("safetensors.duplicate_key", where, "give every tensor a unique name", "tensor name given twice");
    if (!tensor.defined()) fail("safetensors.write", where, "", "cannot write an undefined tensor");
    if (!tensor.device().is_cpu())
      fail("safetensors.write", where, "copy the tensor to the host first", "tensor is on {}", tensor.device().str());
    plan.data_order.push_back({&name, tensor.contiguous()});
  }
  std::sort(plan.data_order.begin(), plan.data_order.end(), [](const PlannedTensor& a, const PlannedTensor& b) {
    return std::make_tuple(element_alignment(b.contiguous.dtype()), std::string_view(*a.name)) <
           std::make_tuple(element_alignment(a.contiguous.dtype()), std::string_view(*b.name));
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  for (const PlannedTensor& t : plan.data_order) {
    const uint64_t begin = plan.data_bytes;
    plan.data_bytes += t.contiguous.nbytes();
    header[*t.name] = {{"dtype", std::string(dtype_name(t.contiguous.dtype()))},
                       {"shape", t.contiguous.shape()},
                       {"data_offsets", {begin, plan.data_bytes}}};
  }
  try {
    plan.header = header.dump();
  } catch (const nlohmann::json::type_error& e) {
    fail("safetensors.utf8", ErrorContext{target, "", ""}, "use UTF-8 tensor names and metadata",
         "a tensor name or metadata string is not valid UTF-8: {}", e.what());
  }
  plan.header.append((8 - plan.header.size() % 8) % 8, ' ');
  if (plan.header.size() > kMaxHeaderBytes)
    fail("safetensors.header_too_large", ErrorContext{target, "", ""}, "write fewer tensors or less metadata per file",
         "the header would be {} bytes, above the limit of {}", plan.header.size(), kMaxHeaderBytes);
  return plan;
}

std::array<char, 8> le_u64(uint64_t v) {
  std::array<char, 8> out{};
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

}  // namespace

std::vector<std::byte> serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  WritePlan plan = plan_write(tensors, metadata, "<memory>");
  std::vector<std::byte> out(8 + plan.header.size() + plan.data_bytes);
  auto length = le_u64(plan.header.size());
  std::memcpy(out.data(), length.data(), 8);
  std::memcpy(out.data() + 8, plan.header.data(), plan.header.size());
  size_t offset = 8 + plan.header.size();
  for (const PlannedTensor& t : plan.data_order) {
    const size_t n = t.contiguous.nbytes();
    if (n > 0) std::memcpy(out.data() + offset, t.contiguous.raw_data(), n);
    offset += n;
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  WritePlan plan = plan_write(tensors, metadata, path.string());
  // Written to a sibling temporary and renamed, so a crash never leaves a truncated file at `path`.
  std::filesystem::path temporary = path;
  temporary += ".partial";
  const ErrorContext where{path.string(), "", ""};
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail("safetensors.write", where, "check the directory exists and is writable", "cannot create {}", temporary.string());
    auto length = le_u64(plan.header.size());
    out.write(length.data(), 8);
    out.write(plan.header.data(), static_cast<std::streamsize>(plan.header.size()));
    for (const PlannedTensor& t : plan.data_order)
      out.write(reinterpret_cast<const char*>(t.contiguous.raw_data()), static_cast<std::streamsize>(t.contiguous.nbytes()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      fail("safetensors.write", where, "check free disk space", "writing {} failed", temporary.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) fail("safetensors.write", where, "", "cannot rename {} to the target: {}", temporary.string(), ec.message());
}

}  // namespace qlm::io
