// Sends result files to a DICOMweb destination by STOW-RS (io/dicomweb_stow.h): one POST of a
// multipart/related; type="application/dicom" body to the studies URL, with the bearer token
// from bearer_token_file when given (read at each send, so it can be rotated). HTTPS verifies
// the server certificate (system CAs, or ca_file). Success is HTTP 200.
#pragma once

#include "core/status.h"
#include "node/config.h"

#include <string>
#include <vector>

namespace voxseg::node {

Status sendByStow(const Destination& destination, const std::vector<std::string>& files);

}  // namespace voxseg::node
