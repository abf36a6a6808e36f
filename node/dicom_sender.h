// Sends result files to a DICOM destination by C-STORE (DCMTK DcmSCU), over TLS when the
// destination says so. One association per call; the files are sent as stored (their own
// transfer syntax, or explicit/implicit little endian when the peer prefers). Success only
// when every file got a success or warning status. Errors name the destination.
#pragma once

#include "core/status.h"
#include "node/config.h"

#include <string>
#include <vector>

namespace voxseg::node {

Status sendByCStore(const Destination& destination, const std::string& calling_ae,
                    const std::vector<std::string>& files);

// DICOM file header fields a sender needs (SOP class, transfer syntax); empty on failure.
struct DicomFileIds {
    std::string sop_class_uid;
    std::string sop_instance_uid;
    std::string transfer_syntax_uid;
};
Result<DicomFileIds> readFileIds(const std::string& path);

}  // namespace voxseg::node
