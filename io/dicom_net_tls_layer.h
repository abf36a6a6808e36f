// Internal to io/ (dicom_net_scp.cpp, dicom_net_scu.cpp): the DCMTK transport layer for a
// DicomTlsConfig. Errors name the file that could not be used. One layer per listener or
// association; it must outlive the association that uses it.
#pragma once

#include "core/status.h"
#include "io/dicom_net_tls.h"

#include <memory>

class DcmTLSTransportLayer;

namespace voxseg::io {

struct DcmTlsLayerDeleter {
    void operator()(DcmTLSTransportLayer* layer) const;
};
using DcmTlsLayerPtr = std::unique_ptr<DcmTLSTransportLayer, DcmTlsLayerDeleter>;

Result<DcmTlsLayerPtr> makeDcmTlsLayer(const DicomTlsConfig& config, bool server);

}  // namespace voxseg::io
