#include "loader/loader.h"

#include <chrono>

#include "layers/tensor_copy.h"

namespace qlm {

std::string LoadReport::summary() const {
  return fmt::format(
      "loaded {} of {} tensors ({:.1f} MiB; {} ignored, {} zero biases skipped) into {} layers and {} dense "
      "tensors in {:.2f}s (load {:.2f}s, finalize {:.2f}s){}",
      tensors_loaded, tensors_total, static_cast<double>(bytes_loaded) / (1 << 20), tensors_ignored,
      zero_biases_skipped, layers_finalized, dense_tensors, seconds, load_seconds, finalize_seconds,
      warnings.empty() ? "" : fmt::format(", {} warning(s)", warnings.size()));
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Names a tensor source for the load loop.
struct SourceView {
  std::vector<std::string> names;
  std::function<Tensor(const std::string&)> tensor;
  std::function<uint64_t(const std::string&)> nbytes;
  std::function<std::string(const std::string&)> file_of;
};

std::string list_some(const std::vector<std::string>& items, size_t max_items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) s += "\n  " + items[i];
  if (items.size() > max_items) s += fmt::format("\n  ... and {} more", items.size() - max_items);
  return s;
}

// Unwritten parameters of every layer and dense tensor: "<layer>: <description>".
std::vector<std::string> incomplete_everywhere(ModuleSet& modules) {
  std::vector<std::string> out;
  for (const auto& [prefix, layer] : modules.linears())
    for (const std::string& d : layer->incomplete_params())
      out.push_back(fmt::format("{} ({}): {}", prefix, layer->method().name(), d));
  for (const auto& [name, p] : modules.dense_params())
    if ((!p.optional || p.written_at_all()) && !p.fully_written()) out.push_back(p.unwritten_description());
  return out;
}

LoadReport load_from(const SourceView& src, ModuleSet& modules, const ProgressCallback& progress) {
  const auto start = Clock::now();
  LoadReport report;
  report.tensors_total = src.names.size();
  LoadProgress prog{.tensors_done = 0, .tensors_total = src.names.size(), .bytes_done = 0, .bytes_total = 0, .tensor = {}};
  for (const std::string& name : src.names) prog.bytes_total += src.nbytes(name);

  std::vector<std::string> unconsumed;
  for (const std::string& name : src.names) {
    const uint64_t nbytes = src.nbytes(name);
    try {
      if (modules.is_ignored(name)) {
        ++report.tensors_ignored;
      } else if (auto target = modules.resolve(name)) {
        if (target->dense) {
          target->dense->load_whole(src.tensor(name), name);
          ++report.tensors_loaded;
          report.bytes_loaded += nbytes;
        } else if (target->layer->find_param(target->param)) {
          target->layer->load_weight(target->param, src.tensor(name), target->shard, name);
          // Finalizing a layer as soon as nothing more can arrive for it keeps peak host memory near one
          // layer's checkpoint tensors: online quantization (quantized size) and loads that release the
          // checkpoint-layout tensors once the kernel has its own copy (e.g. uploaded to the GPU).
          LinearLayer& layer = *target->layer;
          if ((layer.method().uses_meta_device() && layer.incomplete_params().empty()) ||
              (layer.quant_context().release_checkpoint_tensors && layer.all_params_written()))
            layer.finalize();
          ++report.tensors_loaded;
          report.bytes_loaded += nbytes;
        } else if (target->param == "bias") {
          // GPTQ exports write zero biases for layers that have none: harmless only if all zero.
          if (!all_zero(src.tensor(name)))
            fail("loader.unexpected_bias", {.file = {}, .tensor = name, .layer = target->layer->prefix()},
                 "enable the bias in config.json (attention_bias / mlp_bias) if the model has one",
                 "the layer was declared without a bias but the checkpoint has a bias with nonzero values");
          ++report.zero_biases_skipped;
        } else {
          std::string params;
          for (const auto& [pname, _] : target->layer->params()) params += (params.empty() ? "" : ", ") + pname;
          unconsumed.push_back(fmt::format("{} has no consumer (layer {} [{}] has: {})", name,
                                           target->layer->prefix(), target->layer->method().name(), params));
        }
      } else {
        unconsumed.push_back(fmt::format("{} has no consumer", name));
      }
    } catch (const Error& e) {
      throw e.with_context({.file = src.file_of(name), .tensor = name, .layer = {}});
    }
    ++prog.tensors_done;
    prog.bytes_done += nbytes;
    prog.tensor = name;
    if (progress) progress(prog);
  }
  if (report.zero_biases_skipped)
    report.warnings.push_back(fmt::format("skipped {} all-zero bias tensor(s) of layers declared without bias",
                                          report.zero_biases_skipped));
  report.load_seconds = since(start);

  const std::vector<std::string> incomplete = incomplete_everywhere(modules);
  if (!unconsumed.empty())
    fail("loader.unconsumed", {.file = src.file_of(src.names.empty() ? "" : src.names.front()), .tensor = {}, .layer = {}},
         "the checkpoint does not match the model: check architectures and quantization_config (a layer stored "
         "unquantized must be in the format's ignore list); unused tensors must be ignored explicitly",
         "{} checkpoint tensor(s) have no consumer:{}{}", unconsumed.size(), list_some(unconsumed, 20),
         incomplete.empty() ? std::string()
                            : fmt::format("\nand {} parameter(s) stay unwritten:{}", incomplete.size(),
                                          list_some(incomplete, 20)));
  if (!incomplete.empty())
    fail("loader.incomplete", {.file = {}, .tensor = {}, .layer = {}},
         "the checkpoint lacks these tensors; if a layer is stored unquantized, list it in the quantization "
         "config's ignore list",
         "{} parameter(s) not fully written:{}", incomplete.size(), list_some(incomplete, 40));

  const auto fin = Clock::now();
  for (const auto& [prefix, layer] : modules.linears()) {
    layer->finalize();
    ++report.layers_finalized;
  }
  report.dense_tensors = modules.dense_params().size();
  report.finalize_seconds = since(fin);
  report.seconds = since(start);
  return report;
}

}  // namespace

LoadReport load_checkpoint(const io::Checkpoint& checkpoint, ModuleSet& modules, const ProgressCallback& progress) {
  SourceView src;
  src.names = checkpoint.tensor_names();
  src.tensor = [&](const std::string& n) { return checkpoint.tensor(n); };
  src.nbytes = [&](const std::string& n) { return checkpoint.info(n).nbytes(); };
  src.file_of = [&](const std::string& n) {
    return n.empty() ? checkpoint.directory().string() : checkpoint.file_of(n).source_name();
  };
  LoadReport report = load_from(src, modules, progress);
  report.warnings.insert(report.warnings.end(), checkpoint.warnings().begin(), checkpoint.warnings().end());
  return report;
}

LoadReport load_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors, ModuleSet& modules,
                        const ProgressCallback& progress, const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors)
    if (!by_name.emplace(name, &t).second)
      fail("loader.duplicate_tensor", {.file = source, .tensor = name, .layer = {}}, "", "tensor given twice");
  SourceView src;
  for (const auto& [name, _] : by_name) src.names.push_back(name);
  src.tensor = [&](const std::string& n) { return *by_name.at(n); };
  src.nbytes = [&](const std::string& n) { return static_cast<uint64_t>(by_name.at(n)->nbytes()); };
  src.file_of = [&](const std::string&) { return source; };
  return load_from(src, modules, progress);
}

}  // namespace qlm
