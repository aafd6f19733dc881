// The format registry and config resolution (FORMATS.md §2.1, RELIABILITY.md C2).
#include <gtest/gtest.h>

#include "quant/quantization_config.h"
#include "quant/unquantized.h"
#include "support/expect_error.h"

namespace qlm {
namespace {

class NamedConfig : public QuantizationConfig {
 public:
  NamedConfig(std::string name, std::string tag) : name_(std::move(name)), tag_(std::move(tag)) {}
  std::string name() const override { return name_; }
  std::vector<DType> supported_act_dtypes() const override { return {DType::F32}; }
  int min_capability() const override { return 0; }
  std::unique_ptr<LinearMethod> get_linear_method(const LayerInfo&, const QuantContext&) const override {
    return make_unquantized_linear_method();
  }
  std::string describe() const override { return tag_; }

 private:
  std::string name_, tag_;
};

QuantFormat format(std::string name, std::vector<std::string> aliases, std::string family, std::string tag) {
  return QuantFormat{.name = name,
                     .aliases = std::move(aliases),
                     .family = std::move(family),
                     .config_filenames = {},
                     .from_config = [name, tag](const io::JsonView&) -> std::unique_ptr<QuantizationConfig> {
                       return std::make_unique<NamedConfig>(name, tag);
                     }};
}

io::JsonView quant_config(const std::string& method) {
  auto doc = std::make_shared<const nlohmann::json>(nlohmann::json{{"quant_method", method}, {"bits", 4}});
  return io::JsonView(doc, "config.json", "quantization_config");
}

struct Registered {
  Registered() {
    auto& reg = QuantRegistry::instance();
    reg.add(format("rt_gptq", {"rt_gptq_marlin", "RT_AUTO_GPTQ"}, "rt_gptq_family", "gptq"));
    reg.add(format("rt_gptq_exllama", {}, "rt_gptq_family", "exllama"));
    reg.add(format("rt_awq", {}, "", "awq"));
  }
};
const Registered& registered() {
  static Registered r;
  return r;
}

TEST(QuantRegistry, FindsByNameAndAliasCaseInsensitively) {
  registered();
  const auto& reg = QuantRegistry::instance();
  ASSERT_NE(reg.find("rt_gptq"), nullptr);
  EXPECT_EQ(reg.find("rt_gptq_marlin")->name, "rt_gptq");
  EXPECT_EQ(reg.find("rt_auto_gptq")->name, "rt_gptq");
  EXPECT_EQ(reg.find("no_such_format"), nullptr);
  auto names = reg.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "rt_awq"), names.end());
}

TEST(QuantRegistry, DuplicateNameWarnsAndOverrides) {
  auto& reg = QuantRegistry::instance();
  reg.add(format("rt_dup", {"rt_dup_alias"}, "", "first"));
  const size_t before = reg.warnings().size();
  reg.add(format("rt_dup", {}, "", "second"));
  ASSERT_EQ(reg.warnings().size(), before + 1);
  EXPECT_NE(reg.warnings().back().find("'rt_dup' registered again"), std::string::npos) << reg.warnings().back();
  EXPECT_EQ(resolve_quantization_config(quant_config("rt_dup"), std::nullopt)->describe(), "second");
  // The old entry is gone with its aliases.
  EXPECT_EQ(reg.find("rt_dup_alias"), nullptr);
  // An alias taken over by a new format moves to it; the old format keeps its name.
  reg.add(format("rt_owner", {"rt_shared"}, "", "owner"));
  reg.add(format("rt_thief", {"rt_shared"}, "", "thief"));
  EXPECT_EQ(reg.find("rt_shared")->name, "rt_thief");
  EXPECT_EQ(reg.find("rt_owner")->name, "rt_owner");
  EXPECT_NE(reg.warnings().back().find("'rt_shared' registered again: the new registration replaces 'rt_owner'"),
            std::string::npos);
}

TEST(ResolveQuantizationConfig, CheckpointMethodAndSameFamilyOverride) {
  registered();
  EXPECT_EQ(resolve_quantization_config(std::nullopt, std::nullopt), nullptr);
  EXPECT_EQ(resolve_quantization_config(quant_config("RT_GPTQ_MARLIN"), std::nullopt)->describe(), "gptq");
  EXPECT_EQ(resolve_quantization_config(quant_config("rt_gptq"), "rt_gptq_exllama")->describe(), "exllama");
  EXPECT_EQ(resolve_quantization_config(quant_config("rt_gptq"), "rt_gptq_marlin")->describe(), "gptq");
  EXPECT_EQ(resolve_quantization_config(std::nullopt, "rt_awq")->describe(), "awq");
}

TEST(ResolveQuantizationConfig, OverrideAcrossFamiliesIsAnError) {
  registered();
  EXPECT_QLM_ERROR(resolve_quantization_config(quant_config("rt_gptq"), "rt_awq"), "config.override_family",
                   "--quantization rt_awq (family 'rt_awq') does not match the checkpoint's "
                   "quantization_config.quant_method = 'rt_gptq' (family 'rt_gptq_family')");
}

TEST(ResolveQuantizationConfig, UnknownMethodListsRegisteredNames) {
  registered();
  EXPECT_QLM_ERROR(resolve_quantization_config(quant_config("bogus_q"), std::nullopt), "config.unknown_method",
                   "unknown quantization method 'bogus_q'; registered: ");
  EXPECT_QLM_ERROR(resolve_quantization_config(quant_config("bogus_q"), std::nullopt), "config.unknown_method",
                   "rt_awq");
  EXPECT_QLM_ERROR(resolve_quantization_config(quant_config("rt_gptq"), "bogus_q"), "config.unknown_method",
                   "'bogus_q'");
  auto doc = std::make_shared<const nlohmann::json>(nlohmann::json{{"bits", 4}});
  EXPECT_QLM_ERROR(resolve_quantization_config(io::JsonView(doc, "config.json", "quantization_config"), std::nullopt),
                   "config.missing_key", "quant_method");
}

TEST(QuantPlugins, MissingLibraryIsANamedError) {
  EXPECT_QLM_ERROR(load_quant_plugin("/nonexistent/libnothing.so"), "plugin.load", "/nonexistent/libnothing.so");
}

}  // namespace
}  // namespace qlm
