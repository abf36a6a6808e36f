// The only place that knows which backends were compiled in (registry.cpp, its own target
// voxseg_backends so that engine does not depend on cuda/), and the one place device names are
// parsed. Thread-safe.
#pragma once

#include "core/status.h"
#include "engine/backend.h"

#include <memory>
#include <string>
#include <vector>

namespace voxseg::engine {

// A device as the user names it: "auto", "cpu", "reference", "cuda" (GPU 0) or "cuda:N".
struct DeviceSpec {
    enum class Kind { kAuto, kCpu, kReference, kCuda };
    Kind kind = Kind::kAuto;
    int index = 0;  // kCuda: the GPU

    static DeviceSpec automatic() { return {}; }
    static DeviceSpec cpu() { return {Kind::kCpu, 0}; }
    static DeviceSpec reference() { return {Kind::kReference, 0}; }
    static DeviceSpec cuda(int gpu = 0) { return {Kind::kCuda, gpu}; }

    bool isCuda() const { return kind == Kind::kCuda; }
    // "auto", "cpu", "reference", "cuda:N" (the form parseDevice reads back).
    std::string toString() const;
    bool operator==(const DeviceSpec& o) const { return kind == o.kind && index == o.index; }
};

// Parses a device name (above); anything else is kInvalidArgument listing the valid forms.
// `option` names the flag in the message ("--device"; empty: none).
Result<DeviceSpec> parseDevice(const std::string& name, const std::string& option = "--device");
// The names parseDevice accepts, for help texts: "auto, cpu, reference, cuda, cuda:N".
std::string deviceNamesHelp();

// Names of compiled-in backends, best first ("cuda", "cpu", "reference").
std::vector<std::string> availableBackends();

// "auto" picks the best backend with a usable device; a named one that is missing or has no
// device is an error (kNotFound / kDeviceError) that says why. `fallback_warning` receives one
// line when "auto" had to skip a better backend whose device exists but failed; the caller
// shows it. Without `fallback_warning` the line is logged as a warning here instead. A machine
// that simply has no such device (no GPU) is no warning: the first such pick of the process
// logs one info line, "no CUDA device: running on the CPU" (the reason at debug level).
Result<std::unique_ptr<Backend>> createBackend(const DeviceSpec& device,
                                               std::string* fallback_warning = nullptr);
// parseDevice + createBackend.
Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               std::string* fallback_warning = nullptr);

}  // namespace voxseg::engine
