// The only place that knows which backends were compiled in (registry.cpp, its own target
// voxseg_backends so that engine does not depend on cuda/). Thread-safe.
#pragma once

#include "core/status.h"
#include "engine/backend.h"

#include <memory>
#include <string>
#include <vector>

namespace voxseg::engine {

// Names of compiled-in backends, best first ("cuda", "cpu", "reference").
std::vector<std::string> availableBackends();

// Names: "cpu", "reference", "cuda" (GPU 0) or "cuda:N" (GPU N), or "auto".
// "auto" picks the best backend with a usable device; a named one that is missing or has no
// device is an error (kNotFound / kDeviceError) that says why. `fallback_warning` receives one
// line when "auto" had to skip a better backend (e.g. "no CUDA device: using cpu"); the caller
// shows it. Without `fallback_warning` the line is logged as a warning here instead.
Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               std::string* fallback_warning = nullptr);

}  // namespace voxseg::engine
