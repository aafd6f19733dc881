// Test doubles for the quantization system: a method that only declares parameters (from a
// callback), so sharding and loading can be tested for any checkpoint layout without a kernel.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/linear.h"
#include "quant/quantization_config.h"

namespace qlm::testing {

using DeclareParams = std::function<void(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& parts,
                                         int64_t K, int64_t N, DType dtype)>;

class DeclareOnlyMethod : public LinearMethod {
 public:
  explicit DeclareOnlyMethod(DeclareParams declare) : declare_(std::move(declare)) {}
  std::string name() const override { return "declare_only"; }
  void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& parts, int64_t K, int64_t N,
                      DType dtype) override {
    declare_(layer, K_p, parts, K, N, dtype);
  }
  void process_weights_after_loading(LinearLayer&) override { ++processed; }
  Tensor apply(LinearLayer& layer, const Tensor& x, const Tensor*) override {
    return Tensor::zeros({x.size(0), layer.output_size_per_partition()}, DType::F32);
  }
  std::string describe() const override { return "declare only"; }
  int processed = 0;

 private:
  DeclareParams declare_;
};

class DeclareOnlyConfig : public QuantizationConfig {
 public:
  explicit DeclareOnlyConfig(DeclareParams declare) : declare_(std::move(declare)) {}
  std::string name() const override { return "declare_only"; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32}; }
  int min_capability() const override { return 0; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo&, const QuantContext&) const override {
    return std::make_unique<DeclareOnlyMethod>(declare_);
  }
  std::string describe() const override { return "declare only"; }

 private:
  DeclareParams declare_;
};

// Declares one parameter with the given metadata (helper for DeclareParams callbacks).
inline Parameter& declare(LinearLayer& layer, std::string name, ParamKind kind, Shape shape, DType dtype,
                          int input_dim, int output_dim, int packed_dim = -1, PackFactor factor = {}) {
  Parameter p(std::move(name), kind, std::move(shape), dtype);
  p.input_dim = input_dim;
  p.output_dim = output_dim;
  p.packed_dim = packed_dim;
  p.packed_factor = factor;
  return layer.add_param(std::move(p));
}

}  // namespace qlm::testing
