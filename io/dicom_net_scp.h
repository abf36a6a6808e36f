// A DICOM storage SCP for CT, MR and PET images (DCMTK dcmnet DcmSCPPool): C-ECHO and C-STORE,
// one worker thread per association, up to max_associations at once (more are refused by the
// pool as "local limit exceeded"). It negotiates the storage SOP classes of CT, MR and PET and
// their enhanced and legacy-converted forms, in uncompressed and compressed transfer syntaxes
// (lossless compressed preferred, so a sender sends its stored files as they are; lossy last).
//
// The policy is the caller's, through a DicomStorageHandler: which associations to accept and
// what to do with each received instance (the SCP answers the C-STORE with the status the
// handler returns, so the handler decides when the sender may forget the instance).
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
};

enum class DicomAssociationDecision {
    kAccept,
    kRefuseCallerUnknown,   // rejected permanent, "calling AE title not recognized"
    kRefuseOutOfResources,  // rejected transient, "local limit exceeded"
};

// C-STORE response statuses the SCP gives (PS3.4 B.2.3).
enum class DicomStoreStatus : uint16_t {
    kSuccess = 0x0000,
    kSopClassNotSupported = 0x0122,
    kOutOfResources = 0xA700,
    kDataSetDoesNotMatchSopClass = 0xA900,
};

// One instance received by C-STORE, before it is stored anywhere.
struct DicomIncomingInstance {
    // The C-STORE request.
    std::string request_sop_class_uid;
    std::string request_sop_instance_uid;
    bool storage_class_accepted = false;  // the request's SOP class is one this SCP takes
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
    // Writes the instance as a DICOM file (meta header + dataset, in the transfer syntax it
    // arrived in) to `path`; valid during DicomStorageHandler::onStore only.
    std::function<Status(const std::string& path)> save;
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
    DicomTlsConfig tls;  // enabled: DICOM TLS on the port
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
