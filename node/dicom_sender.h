// Sends result files to a DICOM destination by C-STORE (io/dicom_net_scu.h), over TLS when the
// destination says so, with the destination's own certificate when it has one. One association
// per call. Success only when every file got a success or warning status. Errors name the
// destination.
#pragma once

#include "core/status.h"
#include "node/config.h"

#include <string>
#include <vector>

namespace voxseg::node {

Status sendByCStore(const Destination& destination, const std::string& calling_ae,
                    const std::vector<std::string>& files);

}  // namespace voxseg::node
