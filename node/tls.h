// DICOM TLS (DCMTK dcmtls on OpenSSL) for the receiver and the C-STORE sender: own certificate
// and key (PEM), the trusted certificates the other side must chain to, the BCP 195 profile.
// A server with require_peer_certificate refuses clients without a trusted certificate; a
// client always verifies the server. Errors name the file. One object per listener or send.
#pragma once

#include "core/status.h"
#include "node/config.h"

#include <memory>

class DcmTLSTransportLayer;

namespace voxseg::node {

class TlsLayer {
  public:
    ~TlsLayer();
    static Result<std::unique_ptr<TlsLayer>> create(const TlsConfig& config, bool server);
    DcmTLSTransportLayer* layer() const { return layer_.get(); }

  private:
    TlsLayer() = default;
    std::unique_ptr<DcmTLSTransportLayer> layer_;
};

}  // namespace voxseg::node
