#include "node/stow_sender.h"

#include "io/dicomweb_stow.h"

namespace voxseg::node {

Status sendByStow(const Destination& d, const std::vector<std::string>& files) {
    io::HttpEndpoint endpoint;
    endpoint.url = d.url;
    endpoint.ca_file = d.ca_file;
    endpoint.bearer_token_file = d.bearer_token_file;
    endpoint.timeout_seconds = d.timeout_seconds;
    return io::stowFiles(endpoint, d.url, files);
}

}  // namespace voxseg::node
