// A DICOM storage SCP for CT, MR and PET images, and on request SEG and RTSTRUCT (DCMTK dcmnet
// DcmSCPPool): C-ECHO and C-STORE, one worker thread per association, up to max_associations at
// once (more are refused by the pool as "local limit exceeded"). It negotiates the storage SOP
// classes of CT, MR and PET and their enhanced and legacy-converted forms (and SEG and RTSTRUCT
// with accept_segmentations), in uncompressed and compressed transfer syntaxes
// (lossless compressed preferred, so a sender sends its stored files as they are; lossy last).
//
// The policy is the caller's, through a DicomStorageHandler: which associations to accept and
// what to do with each received instance (the SCP answers the C-STORE with the status the
// handler returns, so the handler decides when the sender may forget the instance).
//
// Receipt is bounded: each C-STORE data set is streamed, unparsed and bit for bit, into a file
// (a temporary file in receive_dir, or a memory file) and fsync'ed; only then is it checked
// (io/dicom_instance_check.h: nesting depth before anything parses it, then the read limits and
// the pixel data) and its header read. A data set that nests too deep for DCMTK's recursive
// parser therefore never reaches it, and a write error (a full disk) is answered 0xA700 with
// the system's reason once the rest of the data set has been read off the network.
//
// start() opens the port (failing at once when it is taken) and returns; stop() stops
// accepting, lets running associations end and joins. One SCP per process (DCMTK constructs
// the workers itself; they find the handler through a process-wide pointer).
#pragma once

#include "core/status.h"
#include "io/dicom_net_tls.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace voxseg::io {

struct DicomAssociation {
    std::string calling_ae;
    std::string called_ae;
    std::string peer;  // the caller's IP address (IPv6 literals whole)
    uint64_t id = 0;   // unique within the process, counting from 1
    // Empty for an association request; otherwise why the connection carried none (it closed
    // or timed out before one, or sent bytes that are not an A-ASSOCIATE-RQ: a port scan, a
    // health check, HTTP). Such a connection is refused whatever the handler decides; `peer`
    // is empty when DCMTK's listener dropped it before a worker saw it.
    std::string not_dicom;
};

enum class DicomAssociationDecision {
    kAccept,
    kRefuseCallerUnknown,   // rejected permanent, "calling AE title not recognized"
    kRefuseCalledUnknown,   // rejected permanent, "called AE title not recognized"
    kRefuseOutOfResources,  // rejected transient, "local limit exceeded"
};

// C-STORE response statuses the SCP gives (PS3.4 B.2.3). 0xA700 is the transient one (a
// sender retries later); 0xA900 and 0xC000 say the instance itself is the problem.
enum class DicomStoreStatus : uint16_t {
    kSuccess = 0x0000,
    kSopClassNotSupported = 0x0122,
    kOutOfResources = 0xA700,
    kDataSetDoesNotMatchSopClass = 0xA900,
    kCannotUnderstand = 0xC000,
};

// One instance received by C-STORE, before it is stored anywhere.
struct DicomIncomingInstance {
    // The C-STORE request.
    std::string request_sop_class_uid;
    std::string request_sop_instance_uid;
    bool storage_class_accepted = false;  // the request's SOP class is one this SCP takes
    // The SCP's own checks (io/dicom_instance_check.h) and the receipt: ok, or why the instance
    // cannot be used (reason in the message) and the status to answer it with. When the data
    // set was not parsed (nested too deep, unreadable, not written), the fields below are empty.
    Status check;
    DicomStoreStatus check_status = DicomStoreStatus::kSuccess;
    // The dataset (empty strings where absent).
    std::string sop_class_uid;
    std::string sop_instance_uid;
    std::string study_uid;
    std::string series_uid;
    std::string modality;
    std::string body_part;
    std::string series_description;
    int frames = 1;  // NumberOfFrames, 1 when absent or invalid
    std::string patient_name;
    std::string patient_id;
    std::string patient_birth_date;
    // The instance as received: a DICOM file (meta header + the data set's bytes exactly as
    // they arrived, in their transfer syntax), fsync'ed. Valid during onStore only: a memory
    // file ("/proc/self/fd/<n>") with DicomScpConfig::receive_in_memory, else a temporary file
    // in receive_dir, which `keep` moves and the SCP otherwise removes.
    std::string file;
    // Moves `file` to `path` (one rename: receive_dir must be on the same file system); not
    // for memory files.
    std::function<Status(const std::string& path)> keep;
};

// Called from the association threads, several at once.
class DicomStorageHandler {
  public:
    virtual ~DicomStorageHandler() = default;
    virtual DicomAssociationDecision onAssociation(const DicomAssociation& association) = 0;
    virtual DicomStoreStatus onStore(const DicomAssociation& association,
                                     const DicomIncomingInstance& instance) = 0;
    // An accepted association ended: `released` when the caller asked for a normal release
    // (it was told every C-STORE's status), false when it was aborted or the connection or a
    // DIMSE message failed (the caller may not know what was stored and will likely resend).
    virtual void onAssociationEnd(const DicomAssociation& association, bool released) {
        (void)association;
        (void)released;
    }
};

struct DicomScpConfig {
    std::string ae_title;
    int port = 11112;
    int max_associations = 8;
    DicomTlsConfig tls;              // enabled: DICOM TLS on the port
    std::string receive_dir;         // where data sets are received (temporary files)
    bool receive_in_memory = false;  // receive into memory files instead (nothing on disk)
    // Also take DICOM SEG and RTSTRUCT (the viewer retrieving a segmentation from a PACS; the
    // node takes images only). Their nesting and read limits are checked, not their pixels (no
    // image to decode: the SEG and RTSTRUCT readers check them when they are opened).
    bool accept_segmentations = false;
};

class DicomStorageScp {
  public:
    ~DicomStorageScp();  // stop(), then waits for the associations still running
    // `handler` must outlive the SCP.
    static Result<std::unique_ptr<DicomStorageScp>> start(const DicomScpConfig& config,
                                                          DicomStorageHandler* handler);
    void stop();

    struct Impl;

  private:
    explicit DicomStorageScp(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace voxseg::io
