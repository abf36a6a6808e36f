#include "engine/registry.h"

#include "core/log.h"

// The oneDNN CPU backend is always built (oneDNN is a required dependency).
#include "engine/cpu_backend.h"
#define VOXSEG_HAVE_CPU_BACKEND 1

#ifdef VOXSEG_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace voxseg::engine {

std::vector<std::string> availableBackends() {
    std::vector<std::string> names;
#ifdef VOXSEG_HAVE_CUDA
    names.push_back("cuda");
#endif
#ifdef VOXSEG_HAVE_CPU_BACKEND
    names.push_back("cpu");
#endif
    names.push_back("reference");
    return names;
}

namespace {

Result<std::unique_ptr<Backend>> createNamed(const std::string& name) {
#ifdef VOXSEG_HAVE_CUDA
    if (name == "cuda") return voxseg::cuda::makeCudaBackend();
    // "cuda:N": GPU N (batch mode runs one Segmenter per listed device).
    if (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() < 9 &&
        name.find_first_not_of("0123456789", 5) == std::string::npos)
        return voxseg::cuda::makeCudaBackend(std::stoi(name.substr(5)));
#endif
#ifdef VOXSEG_HAVE_CPU_BACKEND
    if (name == "cpu") return makeCpuBackend();
#endif
    if (name == "reference") return makeReferenceBackend();
    std::string known;
    for (const std::string& n : availableBackends()) known += (known.empty() ? "" : ", ") + n;
    return notFound(
        "backend '" + name + "' is not available in this build (available: " + known + ", or auto)",
        name);
}

}  // namespace

Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               std::string* fallback_warning) {
    if (name != "auto") return createNamed(name);
    std::string skipped;
    for (const std::string& candidate : availableBackends()) {
        auto backend = createNamed(candidate);
        if (backend) {
            if (!skipped.empty()) {
                const std::string line = skipped + ": using " + candidate;
                // One line for the user: the caller that asked for it shows it, else we log it.
                if (fallback_warning)
                    *fallback_warning = line;
                else
                    log::warning("engine", "{}", line);
            }
            return backend;
        }
        skipped += (skipped.empty() ? "" : "; ") + candidate + " unusable (" +
                   backend.status().message() + ")";
    }
    return Status(StatusCode::kDeviceError, "no usable backend: " + skipped, name);
}

}  // namespace voxseg::engine
