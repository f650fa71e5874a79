// NvmlLoader: the real NvmlApi. Opens libnvidia-ml.so.1 with dlopen at run time and resolves
// one table of (versioned) symbols; a missing library or symbol is a reported state
// (LoadError(), kLibraryNotFound / kFunctionNotFound), never a crash.
#pragma once

#include <memory>
#include <string>

#include "gpu/nvml_api.h"
#include "gpu/nvml_api_overrides.h"

namespace gg::gpu {

struct NvmlSymbols;  // the resolved function-pointer table (nvml_loader.cc)

class NvmlLoader final : public NvmlApi {
 public:
  // `library` is the soname to open; tests may pass a path that does not exist.
  explicit NvmlLoader(std::string library = "libnvidia-ml.so.1");
  ~NvmlLoader() override;
  NvmlLoader(const NvmlLoader&) = delete;
  NvmlLoader& operator=(const NvmlLoader&) = delete;

  // dlopen + dlsym; idempotent. Init() calls it. Returns Unavailable with the dlerror() text
  // when the library cannot be opened or lacks the required core symbols.
  Status Load();
  bool loaded() const;
  // Names of optional symbols this driver lacks (e.g. "nvmlDeviceGetTemperatureV"), for logs.
  std::string MissingOptionalSymbols() const;

  GG_NVML_API_OVERRIDES;

 private:
  std::string library_;
  void* handle_ = nullptr;
  std::unique_ptr<NvmlSymbols> sym_;
  std::string load_error_;
  bool load_attempted_ = false;
};

}  // namespace gg::gpu
