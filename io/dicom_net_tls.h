// DICOM TLS settings for the network wrappers (dicom_net_scp.h receives, dicom_net_scu.h sends;
// DCMTK dcmtls on OpenSSL, BCP 195 profile). PEM files. A receiver needs its certificate and
// key and refuses clients without a certificate chaining to `trusted` unless
// require_peer_certificate is false; a sender always verifies the server against `trusted` and
// presents its own certificate when one is given (servers that require client certificates).
// Plain data: copy freely.
#pragma once

#include <string>
#include <vector>

namespace voxseg::io {

struct DicomTlsConfig {
    bool enabled = false;
    std::string certificate;               // own certificate
    std::string private_key;               // its key
    std::vector<std::string> trusted;      // CA or peer certificates trusted for the other side
    bool require_peer_certificate = true;  // receiving: clients must present a trusted certificate
};

}  // namespace voxseg::io
