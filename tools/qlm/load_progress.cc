#include "tools/qlm/load_progress.h"

#include <cstdio>
#include <string>

#include <unistd.h>

namespace qlm::cli {

LoadProgressBar::LoadProgressBar() : tty_(::isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

ProgressCallback LoadProgressBar::callback() {
  return [this](const LoadProgress& p) { update(p); };
}

void LoadProgressBar::update(const LoadProgress& p) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!tty_ && elapsed <= 1.0) return;
  const double fraction = p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 1.0;
  const int percent = static_cast<int>(fraction * 100);
  // Terminals redraw on every percent; logs get a line per 10 %.
  if (percent == last_percent_ || (!tty_ && percent / 10 == last_percent_ / 10 && p.tensors_done != p.tensors_total))
    return;
  last_percent_ = percent;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  const std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kWidth - filled), ' ');
  std::fprintf(stderr, "%sloading [%s] %3d%% %.2f / %.2f GB, %zu / %zu tensors, %.1f s%s", tty_ ? "\r" : "",
               bar.c_str(), percent, static_cast<double>(p.bytes_done) * 1e-9, static_cast<double>(p.bytes_total) * 1e-9,
               p.tensors_done, p.tensors_total, elapsed, tty_ ? "" : "\n");
  std::fflush(stderr);
  drawn_ = true;
}

void LoadProgressBar::finish() {
  if (drawn_ && tty_) std::fputc('\n', stderr);
  drawn_ = false;
}

std::unique_ptr<runtime::Model> load_model_with_progress(const std::string& model_dir, runtime::ModelOptions options) {
  LoadProgressBar progress;
  options.progress = progress.callback();
  try {
    std::unique_ptr<runtime::Model> model = runtime::Model::load(model_dir, options);
    progress.finish();
    return model;
  } catch (...) {
    progress.finish();
    throw;
  }
}

}  // namespace qlm::cli
