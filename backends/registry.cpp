#include "backends/registry.h"

#include "core/log.h"

// The oneDNN CPU backend is always built (oneDNN is a required dependency).
#include "engine/cpu/cpu_backend.h"

#ifdef VOXSEG_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/cuda_errors.h"
#endif

#include <algorithm>
#include <atomic>

namespace voxseg::engine {

std::string DeviceSpec::toString() const {
    switch (kind) {
        case Kind::kAuto:
            return "auto";
        case Kind::kCpu:
            return "cpu";
        case Kind::kReference:
            return "reference";
        case Kind::kCuda:
            return "cuda:" + std::to_string(index);
    }
    return "?";
}

std::string deviceNamesHelp() { return "auto, cpu, reference, cuda, cuda:N"; }

Result<DeviceSpec> parseDevice(const std::string& name, const std::string& option) {
    if (name == "auto") return DeviceSpec::automatic();
    if (name == "cpu") return DeviceSpec::cpu();
    if (name == "reference") return DeviceSpec::reference();
    if (name == "cuda") return DeviceSpec::cuda(0);
    // "cuda:N": GPU N (batch mode runs one Segmenter per listed device).
    const std::string digits = name.rfind("cuda:", 0) == 0 ? name.substr(5) : std::string();
    if (!digits.empty() && digits.size() <= 3 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return DeviceSpec::cuda(std::stoi(digits));
    return invalidArgument((option.empty() ? "" : option + ": ") + "'" + name +
                               "' is not a device; use one of " + deviceNamesHelp() +
                               " (N = GPU number)",
                           name);
}

std::vector<std::string> availableBackends() {
    std::vector<std::string> names;
#ifdef VOXSEG_HAVE_CUDA
    names.push_back("cuda");
#endif
    names.push_back("cpu");
    names.push_back("reference");
    return names;
}

namespace {

Result<std::unique_ptr<Backend>> createNamed(const DeviceSpec& device) {
    switch (device.kind) {
        case DeviceSpec::Kind::kCuda:
#ifdef VOXSEG_HAVE_CUDA
            return voxseg::cuda::makeCudaBackend(device.index);
#else
            break;
#endif
        case DeviceSpec::Kind::kCpu:
            return makeCpuBackend();
        case DeviceSpec::Kind::kReference:
            return makeReferenceBackend();
        case DeviceSpec::Kind::kAuto:
            break;
    }
    std::string known;
    for (const std::string& n : availableBackends()) known += (known.empty() ? "" : ", ") + n;
    return notFound("backend '" + device.toString() +
                        "' is not available in this build (available: " + known + ", or auto)",
                    device.toString());
}

// Whether `device` is unusable only because the machine lacks that hardware (a CPU-only host).
bool deviceAbsent(const DeviceSpec& device) {
#ifdef VOXSEG_HAVE_CUDA
    if (device.kind == DeviceSpec::Kind::kCuda) return voxseg::cuda::noGpuHardware();
#endif
    return device.kind == DeviceSpec::Kind::kCuda;  // not built: nothing to warn about either
}

}  // namespace

Result<std::unique_ptr<Backend>> createBackend(const DeviceSpec& device,
                                               std::string* fallback_warning) {
    if (device.kind != DeviceSpec::Kind::kAuto) return createNamed(device);
    std::string skipped;
    bool only_absent = true;  // every skipped backend lacks its device (a CPU-only machine)
    for (const std::string& candidate : availableBackends()) {
        VOXSEG_ASSIGN_OR_RETURN(DeviceSpec spec, parseDevice(candidate));
        auto backend = createNamed(spec);
        if (backend) {
            if (!skipped.empty()) {
                const std::string line = skipped + ": using " + candidate;
                // A machine without a GPU is not a problem to warn about on every run: one info
                // line per process ("no CUDA device: running on the CPU"), the reason at debug
                // level. A device that exists but fails is a warning the caller shows (or we
                // log).
                static std::atomic<bool> absent_said{false};
                if (only_absent) {
                    log::debug("engine", "{}", line);
                    if (!absent_said.exchange(true))
                        log::info("engine", "no CUDA device: running on the {}",
                                  candidate == "cpu" ? "CPU" : candidate + " backend");
                } else if (fallback_warning) {
                    *fallback_warning = line;
                } else {
                    log::warning("engine", "{}", line);
                }
            }
            return backend;
        }
        only_absent = only_absent && deviceAbsent(spec);
        skipped += (skipped.empty() ? "" : "; ") + candidate + " unusable (" +
                   backend.status().message() + ")";
    }
    return Status(StatusCode::kDeviceError, "no usable backend: " + skipped, "auto");
}

Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               std::string* fallback_warning) {
    VOXSEG_ASSIGN_OR_RETURN(DeviceSpec device, parseDevice(name));
    return createBackend(device, fallback_warning);
}

}  // namespace voxseg::engine
