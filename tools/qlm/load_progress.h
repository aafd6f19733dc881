// A progress bar on stderr while a checkpoint loads: drawn in place when stderr is a terminal, and
// otherwise only once the load has taken more than a second (then as a few plain lines), so that
// small loads and logs stay quiet.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "loader/loader.h"
#include "runtime/model.h"

namespace qlm::cli {

class LoadProgressBar {
 public:
  LoadProgressBar();
  // The callback to hand to the loader; it refers to this object, which must outlive the load.
  ProgressCallback callback();
  // Ends the bar's line if one was drawn.
  void finish();

 private:
  void update(const LoadProgress& p);
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  bool drawn_ = false;
  int last_percent_ = -1;
};

// runtime::Model::load(model_dir, options) with a LoadProgressBar as its progress callback, the bar's line ended
// whether the load succeeds or throws.
std::unique_ptr<runtime::Model> load_model_with_progress(const std::string& model_dir, runtime::ModelOptions options);

}  // namespace qlm::cli
