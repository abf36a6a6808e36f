// Sending DICOM files to a DICOMweb server by STOW-RS (PS3.18 10.5): one POST of a
// multipart/related; type="application/dicom" body to the studies URL ({root}/studies), with
// the endpoint's bearer token and CA file (io/http_client.h). Success is HTTP 200 (every
// instance stored); anything else is an error naming the URL, with the start of the answer.
// Used by the node's DICOMweb destinations and the viewer's "Send to PACS". Reentrant.
#pragma once

#include "core/status.h"
#include "io/http_client.h"

#include <string>
#include <vector>

namespace voxseg::io {

// `studies_url`: the full STOW-RS URL, e.g. http://pacs:8042/dicom-web/studies.
Status stowFiles(const HttpEndpoint& endpoint, const std::string& studies_url,
                 const std::vector<std::string>& files);

}  // namespace voxseg::io
