#include "node/dicom_sender.h"

#include "io/dicom_net_scu.h"

#include <fmt/format.h>

namespace voxseg::node {

Status sendByCStore(const Destination& d, const std::string& calling_ae,
                    const std::vector<std::string>& files) {
    io::DicomPeer peer;
    peer.label = fmt::format("{} ({}@{}:{})", d.name, d.ae_title, d.host, d.port);
    peer.ae_title = d.ae_title;
    peer.host = d.host;
    peer.port = d.port;
    peer.timeout_seconds = d.timeout_seconds;
    peer.tls = d.tls;
    return io::storeFiles(peer, calling_ae, files);
}

}  // namespace voxseg::node
