// Receiving one C-STORE data set into a file without parsing it (DCMTK dcmnet), for the storage
// SCP (io/dicom_net_scp.cpp). The file is what DCMTK's storescp writes with --bit-preserving:
// file meta information built from the request (SOP class and instance, the presentation
// context's transfer syntax, the caller's AE title), then the data set's bytes exactly as they
// arrived. Nothing is parsed, so a hostile data set cannot crash the receiver; checks follow on
// the file (io/dicom_instance_check.h).
//
// Unlike DCMTK's own file stream, a failed write keeps its errno ("No space left on device",
// not "I/O suspension or premature end of stream") and the rest of the data set is still read
// off the network, so the C-STORE can be answered.
// Internal to io/. Not thread-safe per object; one ReceiveFile per C-STORE.
#pragma once

#include "core/status.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmnet/assoc.h>
#include <dcmtk/dcmnet/dimse.h>

#include <string>

namespace voxseg::io {

// The file one data set is received into: a temporary file in a folder (removed when
// destroyed unless kept) or an anonymous memory file (memfd; nothing reaches a disk).
class ReceiveFile {
  public:
    ReceiveFile() = default;
    ReceiveFile(const ReceiveFile&) = delete;
    ReceiveFile& operator=(const ReceiveFile&) = delete;
    ~ReceiveFile();

    Status open(const std::string& dir, bool in_memory);
    // Flushes a disk file to disk (fsync) and closes it; a memory file stays open (its path
    // needs the descriptor).
    Status finish();
    // Renames the disk file to `target` (same file system); afterwards it is not removed.
    Status keep(const std::string& target);

    int fd() const { return fd_; }
    // "/proc/self/fd/<n>" for a memory file.
    const std::string& path() const { return path_; }

  private:
    int fd_ = -1;
    std::string path_;
    bool in_memory_ = false;
    bool kept_ = false;
};

// Opens `file` (in `dir`, or in memory) and receives the data set of `req` (presentation
// context `pres_id`) on `assoc` into it, then finish()es it. A bad condition is a network
// failure (the association is lost). A failure of the file (it cannot be created, a write or
// the fsync fails) is returned in `problem`, with the system's reason, after the rest of the
// data set was read off the network: the C-STORE can still be answered.
OFCondition receiveDataSet(T_ASC_Association* assoc, const T_DIMSE_C_StoreRQ& req,
                           T_ASC_PresentationContextID pres_id, T_DIMSE_BlockingMode blocking,
                           int timeout, const std::string& dir, bool in_memory, ReceiveFile& file,
                           Status& problem);

}  // namespace voxseg::io
