#include "engine/registry.h"

#ifdef VOXSEG_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace voxseg::engine {

std::vector<std::string> availableBackends() {
    std::vector<std::string> names;
#ifdef VOXSEG_HAVE_CUDA
    names.push_back("cuda");
#endif
    names.push_back("reference");
    return names;
}

Result<std::unique_ptr<Backend>> createBackend(const std::string& name,
                                               std::string* fallback_warning) {
    if (name == "reference") return makeReferenceBackend();
    return notFound("backend '" + name + "' is not available in this build", name);
}

}  // namespace voxseg::engine
