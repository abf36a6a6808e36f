// Reading the RTSTRUCTs other tools wrote (label `data`; skips without ../shared/data).
#include "io/rtstruct_reader.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

namespace voxseg::io {
namespace {}  // namespace
}  // namespace voxseg::io
