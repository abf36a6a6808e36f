// The smallest valid version-1 model.json (one CT channel, one label), for tests of single
// model.json keys: each test adds the key it checks.
#pragma once

#include <nlohmann/json.hpp>

namespace voxseg::engine::fixtures {

inline nlohmann::json minimalModelJson() {
    return nlohmann::json::parse(R"json({
      "name": "demo", "version": "1", "description": "", "license": "MIT",
      "channels": [{"modality": "CT", "normalization": {"scheme": "none"}}],
      "spacing_mm": [1, 1, 1], "patch_size": [8, 8, 8], "axis_order": "zyx",
      "orientation": "native", "output": "softmax",
      "labels": [{"value": 1, "name": "a", "color": [1, 2, 3]}],
      "sha256": "0000000000000000000000000000000000000000000000000000000000000000"
    })json");
}

}  // namespace voxseg::engine::fixtures
