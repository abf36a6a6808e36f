#include "io/dicom_net_scp.h"

#include "io/dicom_charset.h"
#include "io/dicom_instance_check.h"
#include "io/dicom_net_receive.h"
#include "io/dicom_net_tls_layer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmnet/diutil.h>
#include <dcmtk/dcmnet/scppool.h>
#include <dcmtk/dcmnet/scpthrd.h>
#include <dcmtk/dcmtls/tlslayer.h>
#include <dcmtk/oflog/appender.h>
#include <dcmtk/oflog/oflog.h>
#include <dcmtk/oflog/spi/logevent.h>

#include <atomic>
#include <thread>
#include <vector>

namespace voxseg::io {
namespace {

// DcmSCPPool default-constructs its workers: they find the handler through this pointer, set
// while an SCP runs (one per process).
std::atomic<DicomStorageHandler*> g_handler{nullptr};
std::atomic<uint64_t> g_association_count{0};
// Where data sets are received (DicomScpConfig); set by start() before the pool's thread starts.
std::string g_receive_dir;
bool g_receive_in_memory = false;
bool g_accept_segmentations = false;  // DicomScpConfig::accept_segmentations

const char* const kStorageClasses[] = {
    UID_CTImageStorage,
    UID_EnhancedCTImageStorage,
    UID_LegacyConvertedEnhancedCTImageStorage,
    UID_MRImageStorage,
    UID_EnhancedMRImageStorage,
    UID_LegacyConvertedEnhancedMRImageStorage,
    UID_PositronEmissionTomographyImageStorage,
    UID_EnhancedPETImageStorage,
    UID_LegacyConvertedEnhancedPETImageStorage,
};

// Lossless compressed first: a sender offering its stored compressed syntax next to an
// uncompressed one sends the file as it is (no transcoding, or a sender that cannot decode it
// would fail); then uncompressed; lossy syntaxes last, so that an uncompressed offer wins over
// a lossy one.
const char* const kTransferSyntaxes[] = {
    UID_JPEGProcess14SV1TransferSyntax,
    UID_JPEGProcess14TransferSyntax,
    UID_JPEGLSLosslessTransferSyntax,
    UID_JPEG2000LosslessOnlyTransferSyntax,
    UID_RLELosslessTransferSyntax,
    UID_DeflatedExplicitVRLittleEndianTransferSyntax,
    UID_LittleEndianExplicitTransferSyntax,
    UID_LittleEndianImplicitTransferSyntax,
    UID_BigEndianExplicitTransferSyntax,
    UID_JPEGProcess1TransferSyntax,
    UID_JPEGProcess2_4TransferSyntax,
    UID_JPEGLSLossyTransferSyntax,
    UID_JPEG2000TransferSyntax,
};

// Taken with DicomScpConfig::accept_segmentations.
const char* const kSegmentationClasses[] = {
    UID_SegmentationStorage,
    UID_RTStructureSetStorage,
};

bool isSegmentationClass(const std::string& uid) {
    for (const char* c : kSegmentationClasses)
        if (uid == c) return true;
    return false;
}

bool isStorageClass(const std::string& uid) {
    for (const char* c : kStorageClasses)
        if (uid == c) return true;
    return g_accept_segmentations && isSegmentationClass(uid);
}

// UTF-8 whatever the instance's SpecificCharacterSet: these strings go into the spool's JSON.
std::string text(DcmDataset& ds, const DcmTagKey& tag) { return charset::getUtf8(&ds, tag); }

std::string hostOf(const std::string& address) {
    // DCMTK gives the caller as "host" or "host:port"; IPv6 literals are kept whole.
    const auto colon = address.rfind(':');
    if (colon != std::string::npos && address.find(':') == colon) return address.substr(0, colon);
    return address;
}

void describe(DcmDataset& ds, DicomIncomingInstance& in) {
    in.sop_class_uid = text(ds, DCM_SOPClassUID);
    in.sop_instance_uid = text(ds, DCM_SOPInstanceUID);
    in.study_uid = text(ds, DCM_StudyInstanceUID);
    in.series_uid = text(ds, DCM_SeriesInstanceUID);
    in.modality = text(ds, DCM_Modality);
    in.body_part = text(ds, DCM_BodyPartExamined);
    in.series_description = text(ds, DCM_SeriesDescription);
    Sint32 frames = 1;
    if (ds.findAndGetSint32(DCM_NumberOfFrames, frames).bad() || frames < 1) frames = 1;
    in.frames = frames;
    in.patient_name = text(ds, DCM_PatientName);
    in.patient_id = text(ds, DCM_PatientID);
    in.patient_birth_date = text(ds, DCM_PatientBirthDate);
}

// What the header claims, for the limits (io/dicom_instance_check.h): an absent BitsAllocated
// counts 0 bits, not PixelFormat's default 16.
PixelFormat pixelClaim(DcmDataset& ds) {
    PixelFormat c;
    c.bits_allocated = 0;
    Uint16 v = 0;
    if (ds.findAndGetUint16(DCM_Rows, v).good()) c.rows = v;
    if (ds.findAndGetUint16(DCM_Columns, v).good()) c.columns = v;
    if (ds.findAndGetUint16(DCM_SamplesPerPixel, v).good()) c.samples_per_pixel = v;
    if (ds.findAndGetUint16(DCM_BitsAllocated, v).good()) c.bits_allocated = v;
    Sint32 frames = 1;
    if (ds.findAndGetSint32(DCM_NumberOfFrames, frames).good() && frames > 1) c.frames = frames;
    return c;
}

DicomStoreStatus statusFor(InstanceProblem p) {
    switch (p) {
        case InstanceProblem::kNone:
            return DicomStoreStatus::kSuccess;
        case InstanceProblem::kOverLimit:
            return DicomStoreStatus::kOutOfResources;
        case InstanceProblem::kPixelData:
            return DicomStoreStatus::kDataSetDoesNotMatchSopClass;
        case InstanceProblem::kTooDeep:
        case InstanceProblem::kUnreadable:
        case InstanceProblem::kUnsupported:
            return DicomStoreStatus::kCannotUnderstand;
    }
    return DicomStoreStatus::kCannotUnderstand;
}

// Why a connection the listener handed over carries no association request, or "" when it
// does. DCMTK's listener passes on connections that closed or timed out before a PDU, or whose
// first PDU was an abort or a release, with empty association parameters.
std::string notAnAssociationRequest(const T_ASC_Parameters& params) {
    if (params.DULparams.applicationContextName[0] == '\0' ||
        params.DULparams.callingAPTitle[0] == '\0')
        return "not a DICOM association request (the connection closed, timed out or sent "
               "something else)";
    return {};
}

// DCMTK's listener (DcmBaseSCPPool::listen) reads the first PDU of a connection itself and
// drops one that is no association request (HTTP, random bytes, a failed TLS handshake) with
// only an error in DCMTK's log, before any worker sees it. This appender on DCMTK's network
// logger passes that error on to the handler as a refused connection, so it can be audited;
// the listener does not say who connected.
class ListenerErrorAppender : public dcmtk::log4cplus::Appender {
  public:
    ~ListenerErrorAppender() override { destructorImpl(); }
    void close() override {}

  protected:
    void append(const dcmtk::log4cplus::spi::InternalLoggingEvent& event) override {
        static const std::string kPrefix = "DcmBaseSCPPool: Error receiving association: ";
        const std::string message = event.getMessage().c_str();
        if (message.rfind(kPrefix, 0) != 0) return;
        DicomStorageHandler* handler = g_handler.load();
        if (handler == nullptr) return;
        DicomAssociation a;
        a.id = ++g_association_count;
        a.not_dicom = "no DICOM association request (" + message.substr(kPrefix.size()) + ")";
        handler->onAssociation(a);  // refused whatever it answers: DCMTK dropped it already
    }
};

class StorageScp : public DcmThreadSCP {
  public:
    // DcmSCP keeps the association private; receiving a data set into our own stream needs it.
    OFCondition run(T_ASC_Association* incoming) override {
        assoc_ = incoming;
        const OFCondition c = DcmThreadSCP::run(incoming);
        assoc_ = nullptr;
        return c;
    }

  protected:
    void notifyAssociationRequest(const T_ASC_Parameters& params,
                                  DcmSCPActionType& action) override {
        association_.calling_ae = params.DULparams.callingAPTitle;
        association_.called_ae = params.DULparams.calledAPTitle;
        association_.peer = hostOf(params.DULparams.callingPresentationAddress);
        association_.id = ++g_association_count;
        association_.not_dicom = notAnAssociationRequest(params);
        DicomStorageHandler* handler = g_handler.load();
        decision_ = handler ? handler->onAssociation(association_)
                            : DicomAssociationDecision::kRefuseOutOfResources;
        if (!association_.not_dicom.empty() && decision_ == DicomAssociationDecision::kAccept)
            decision_ = DicomAssociationDecision::kRefuseCallerUnknown;
        if (decision_ != DicomAssociationDecision::kAccept)
            action = DCMSCP_ACTION_REFUSE_ASSOCIATION;
    }

    void refuseAssociation(const DcmRefuseReasonType reason) override {
        // The pool's own "too many associations" refusal is transient with "local limit
        // exceeded"; a lack of other resources (a full disk) is the same kind of refusal.
        if (decision_ == DicomAssociationDecision::kRefuseOutOfResources)
            DcmThreadSCP::refuseAssociation(DCMSCP_TOO_MANY_ASSOCIATIONS);
        else if (decision_ == DicomAssociationDecision::kRefuseCallerUnknown)
            DcmThreadSCP::refuseAssociation(DCMSCP_CALLING_AE_TITLE_NOT_RECOGNIZED);
        else if (decision_ == DicomAssociationDecision::kRefuseCalledUnknown)
            DcmThreadSCP::refuseAssociation(DCMSCP_CALLED_AE_TITLE_NOT_RECOGNIZED);
        else
            DcmThreadSCP::refuseAssociation(reason);
    }

    // Reported at the release request, before the release response: once the caller is told
    // the association ended well, the handler already knows it.
    void notifyReleaseRequest() override {
        DcmThreadSCP::notifyReleaseRequest();
        reportEnd(true);
    }

    void notifyAssociationTermination() override {
        DcmThreadSCP::notifyAssociationTermination();
        reportEnd(false);  // aborted, or the connection or a DIMSE message failed
    }

    OFCondition handleIncomingCommand(T_DIMSE_Message* msg,
                                      const DcmPresentationContextInfo& info) override {
        if (msg->CommandField != DIMSE_C_STORE_RQ)
            return DcmThreadSCP::handleIncomingCommand(msg, info);
        T_DIMSE_C_StoreRQ& req = msg->msg.CStoreRQ;
        if (req.DataSetType == DIMSE_DATASET_NULL || assoc_ == nullptr)
            return DIMSE_BADMESSAGE;  // as DcmSCP does: no data set announced
        DicomIncomingInstance in;
        in.request_sop_class_uid = req.AffectedSOPClassUID;
        in.request_sop_instance_uid = req.AffectedSOPInstanceUID;
        in.storage_class_accepted = isStorageClass(in.request_sop_class_uid);
        ReceiveFile file;
        const OFCondition cond = receive(req, info.presentationContextID, file, in);
        if (cond.bad()) return cond;  // the network failed: the association ends
        if (in.check.isOk()) inspect(file.path(), in);
        const Uint16 status = store(file, in);
        return sendSTOREResponse(info.presentationContextID, req, status);
    }

  private:
    void reportEnd(bool released) {
        DicomStorageHandler* handler = g_handler.load();
        if (handler && decision_ == DicomAssociationDecision::kAccept && association_.id != 0)
            handler->onAssociationEnd(association_, released);
        association_.id = 0;  // reported once; a worker serves associations one after another
    }

    // Reads the data set off the network into `file`, unparsed (io/dicom_net_receive.h); a
    // failure of the file is answered 0xA700 with its reason.
    OFCondition receive(const T_DIMSE_C_StoreRQ& req, T_ASC_PresentationContextID pres_id,
                        ReceiveFile& file, DicomIncomingInstance& in) {
        Status problem;
        const OFCondition cond = receiveDataSet(assoc_, req, pres_id, getDIMSEBlockingMode(),
                                                static_cast<int>(getDIMSETimeout()), g_receive_dir,
                                                g_receive_in_memory, file, problem);
        if (!problem.isOk()) {
            in.check = problem;
            in.check_status = DicomStoreStatus::kOutOfResources;
        }
        return cond;
    }

    // The checks of io/dicom_instance_check.h around the one parse of the header: nesting
    // before DCMTK reads anything, then the header's attributes, the limits, the pixel data.
    void inspect(const std::string& path, DicomIncomingInstance& in) {
        const std::string name = "SOP instance " + in.request_sop_instance_uid;
        auto failed = [&in](const InstanceCheck& c) {
            if (c.ok()) return false;
            in.check = c.status;
            in.check_status = statusFor(c.problem);
            return true;
        };
        if (failed(checkInstanceNesting(path, name))) return;
        DcmFileFormat file;
        OFCondition cond;
        try {
            cond = file.loadFile(OFFilename(path.c_str()));
        } catch (const std::exception& e) {
            cond = makeOFCondition(OFM_dcmdata, 1, OF_error, e.what());
        }
        if (cond.bad()) {
            in.check = corruptData(
                std::string("not a readable DICOM data set (") + cond.text() + ")", name);
            in.check_status = DicomStoreStatus::kCannotUnderstand;
            return;
        }
        DcmDataset& ds = *file.getDataset();
        describe(ds, in);
        if (failed(checkInstanceLimits(pixelClaim(ds), name))) return;
        // A SEG's or RTSTRUCT's pixels are no image (1-bit frames, or none): its reader checks it.
        const bool segmentation = g_accept_segmentations &&
                                  isSegmentationClass(in.request_sop_class_uid) &&
                                  isSegmentationClass(in.sop_class_uid);
        if (!segmentation) failed(checkInstancePixels(path, name));
    }

    Uint16 store(ReceiveFile& file, DicomIncomingInstance& in) {
        DicomStorageHandler* handler = g_handler.load();
        if (!handler) return STATUS_STORE_Refused_OutOfResources;
        in.file = file.path();
        in.keep = [&file](const std::string& path) { return file.keep(path); };
        return static_cast<Uint16>(handler->onStore(association_, in));
    }

    T_ASC_Association* assoc_ = nullptr;
    DicomAssociation association_;
    DicomAssociationDecision decision_ = DicomAssociationDecision::kAccept;
};

}  // namespace

struct DicomStorageScp::Impl {
    DcmSCPPool<StorageScp> pool;
    DcmTlsLayerPtr tls;
    std::thread thread;
    OFCondition result = EC_Normal;
    dcmtk::log4cplus::SharedAppenderPtr listener_errors;
};

DicomStorageScp::DicomStorageScp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DicomStorageScp::~DicomStorageScp() {
    stop();
    if (impl_ && impl_->listener_errors.get() != nullptr)
        OFLog::getLogger(DCMNET_LOGGER_NAME).removeAppender(impl_->listener_errors);
    impl_.reset();  // the pool's destructor waits for associations still running
    g_handler = nullptr;
}

Result<std::unique_ptr<DicomStorageScp>> DicomStorageScp::start(const DicomScpConfig& c,
                                                                DicomStorageHandler* handler) {
    auto impl = std::make_unique<Impl>();
    DcmSCPConfig& cfg = impl->pool.getConfig();
    cfg.setAETitle(c.ae_title.c_str());
    cfg.setPort(static_cast<Uint16>(c.port));
    cfg.setConnectionBlockingMode(DUL_NOBLOCK);
    cfg.setConnectionTimeout(1);  // the listen loop looks for stop() every second
    cfg.setDIMSEBlockingMode(DIMSE_NONBLOCKING);
    cfg.setDIMSETimeout(60);
    cfg.setACSETimeout(30);
    cfg.setHostLookupEnabled(OFFalse);
    impl->pool.setMaxThreads(static_cast<Uint16>(c.max_associations));
    if (c.receive_dir.empty() && !c.receive_in_memory)
        return internalError("the DICOM receiver needs a folder or memory to receive into");
    OFList<OFString> xfers;
    for (const char* ts : kTransferSyntaxes) xfers.push_back(ts);
    std::vector<const char*> classes(std::begin(kStorageClasses), std::end(kStorageClasses));
    if (c.accept_segmentations)
        classes.insert(classes.end(), std::begin(kSegmentationClasses),
                       std::end(kSegmentationClasses));
    for (const char* sop : classes)
        if (cfg.addPresentationContext(sop, xfers).bad())
            return internalError(std::string("cannot add presentation context ") + sop);
    OFList<OFString> echo_xfers;
    echo_xfers.push_back(UID_LittleEndianExplicitTransferSyntax);
    echo_xfers.push_back(UID_LittleEndianImplicitTransferSyntax);
    if (cfg.addPresentationContext(UID_VerificationSOPClass, echo_xfers).bad())
        return internalError("cannot add the verification presentation context");
    if (c.tls.enabled) {
        VOXSEG_ASSIGN_OR_RETURN(impl->tls, makeDcmTlsLayer(c.tls, /*server=*/true));
        cfg.setTransportLayer(impl->tls.get());
    }
    DicomStorageHandler* expected = nullptr;
    if (!g_handler.compare_exchange_strong(expected, handler))
        return internalError("a DICOM receiver is already running in this process");
    // Fail early when the port is taken: the pool would only log it from its thread.
    {
        T_ASC_Network* probe = nullptr;
        OFCondition cond = ASC_initializeNetwork(NET_ACCEPTOR, c.port, 1, &probe);
        if (cond.bad()) {
            g_handler = nullptr;
            return ioError("cannot listen on port " + std::to_string(c.port) + ": " + cond.text());
        }
        ASC_dropNetwork(&probe);
    }
    g_receive_dir = c.receive_dir;
    g_receive_in_memory = c.receive_in_memory;
    g_accept_segmentations = c.accept_segmentations;
    impl->listener_errors = dcmtk::log4cplus::SharedAppenderPtr(new ListenerErrorAppender);
    OFLog::getLogger(DCMNET_LOGGER_NAME).addAppender(impl->listener_errors);
    Impl* raw = impl.get();
    raw->thread = std::thread([raw] { raw->result = raw->pool.listen(); });
    return std::unique_ptr<DicomStorageScp>(new DicomStorageScp(std::move(impl)));
}

void DicomStorageScp::stop() {
    if (!impl_ || !impl_->thread.joinable()) return;
    impl_->pool.stopAfterCurrentAssociations();
    impl_->thread.join();
}

}  // namespace voxseg::io
