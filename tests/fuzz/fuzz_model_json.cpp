// libFuzzer target: model.json of a model package (parseModelPackage validates every key; the
// ONNX files it names are not read). Paths are resolved against a folder that does not exist.
// An "interactive" section (an nnInteractive package, docs/interactive.md) also goes through
// parseInteractiveSpec, as InteractiveModel::load reads it.
#include "edit/interactive/interactive_model.h"
#include "engine/model/model_package.h"
#include "tests/fuzz/fuzz_support.h"

#include <nlohmann/json.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto package = voxseg::engine::parseModelPackage(text, "model.json", "/nonexistent/package");
    if (package.isOk()) (void)voxseg::engine::modelPackageToJson(*package);
    const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_object() && root.contains("interactive"))
        (void)voxseg::edit::interactive::parseInteractiveSpec(root["interactive"].dump(),
                                                              "/nonexistent/package");
    return 0;
}
