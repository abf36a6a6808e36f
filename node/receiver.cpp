#include "node/receiver.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "node/tls.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmnet/diutil.h>
#include <dcmtk/dcmnet/scppool.h>
#include <dcmtk/dcmnet/scpthrd.h>
#include <dcmtk/dcmtls/tlslayer.h>

#include <atomic>
#include <filesystem>
#include <thread>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";

// DcmSCPPool default-constructs its workers: they find the node through this pointer, set
// while a Receiver runs (one per process).
std::atomic<const ReceiverContext*> g_context{nullptr};

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

bool isStorageClass(const std::string& uid) {
    for (const char* c : kStorageClasses)
        if (uid == c) return true;
    return false;
}

std::string text(DcmDataset& ds, const DcmTagKey& tag) {
    OFString v;
    if (ds.findAndGetOFStringArray(tag, v).bad()) return {};
    return std::string(v.c_str());
}

std::string hostOf(const std::string& address) {
    // DCMTK gives the caller as "host" or "host:port"; IPv6 literals are kept whole.
    const auto colon = address.rfind(':');
    if (colon != std::string::npos && address.find(':') == colon) return address.substr(0, colon);
    return address;
}

class NodeScp : public DcmThreadSCP {
  protected:
    void notifyAssociationRequest(const T_ASC_Parameters& params,
                                  DcmSCPActionType& action) override {
        const ReceiverContext* ctx = g_context.load();
        calling_ae_ = params.DULparams.callingAPTitle;
        peer_ = hostOf(params.DULparams.callingPresentationAddress);
        refusal_ = Refusal::kNone;
        if (!ctx) {
            refusal_ = Refusal::kDisk;
        } else if (!callerAllowed(*ctx->config)) {
            refusal_ = Refusal::kCaller;
            ++ctx->metrics->associations_rejected_caller;
            log::warning(kComponent, "association from {} ({}) refused: not in allowed_callers",
                         calling_ae_, peer_);
            ctx->audit->record(
                "association_refused",
                {{"calling_ae", calling_ae_}, {"peer", peer_}, {"reason", "caller not allowed"}});
        } else if (diskGuardActive(*ctx)) {
            refusal_ = Refusal::kDisk;
            ++ctx->metrics->associations_rejected_disk;
            log::error(kComponent,
                       "association from {} ({}) refused: out of resources (spool free space "
                       "below min_free_mb)",
                       calling_ae_, peer_);
            ctx->audit->record("association_refused", {{"calling_ae", calling_ae_},
                                                       {"peer", peer_},
                                                       {"reason", "out of resources: disk"}});
        }
        if (refusal_ != Refusal::kNone) {
            action = DCMSCP_ACTION_REFUSE_ASSOCIATION;
            return;
        }
        ++ctx->metrics->associations;
        ctx->audit->record("association",
                           {{"calling_ae", calling_ae_},
                            {"called_ae", std::string(params.DULparams.calledAPTitle)},
                            {"peer", peer_}});
    }

    void refuseAssociation(const DcmRefuseReasonType reason) override {
        // The pool's own "too many associations" refusal is transient with "local limit
        // exceeded"; a full disk is the same kind of temporary lack of resources.
        if (refusal_ == Refusal::kDisk)
            DcmThreadSCP::refuseAssociation(DCMSCP_TOO_MANY_ASSOCIATIONS);
        else if (refusal_ == Refusal::kCaller)
            DcmThreadSCP::refuseAssociation(DCMSCP_CALLING_AE_TITLE_NOT_RECOGNIZED);
        else
            DcmThreadSCP::refuseAssociation(reason);
    }

    OFCondition handleIncomingCommand(T_DIMSE_Message* msg,
                                      const DcmPresentationContextInfo& info) override {
        if (msg->CommandField != DIMSE_C_STORE_RQ)
            return DcmThreadSCP::handleIncomingCommand(msg, info);
        T_DIMSE_C_StoreRQ& req = msg->msg.CStoreRQ;
        DcmDataset* ds = nullptr;
        OFCondition cond = receiveSTORERequest(req, info.presentationContextID, ds);
        if (cond.bad()) {
            delete ds;
            return cond;
        }
        const Uint16 status = store(req, ds);  // takes ownership
        return sendSTOREResponse(info.presentationContextID, req, status);
    }

  private:
    enum class Refusal { kNone, kCaller, kDisk };

    bool callerAllowed(const NodeConfig& config) const {
        for (const auto& a : config.allowed_callers)
            if (a.ae_title == calling_ae_ && (a.host.empty() || a.host == peer_)) return true;
        return false;
    }

    Uint16 refuse(const ReceiverContext& ctx, Uint16 status, const std::string& why,
                  const std::string& sop_uid) {
        ++ctx.metrics->instances_refused;
        log::warning(kComponent, "C-STORE of {} from {} refused: {}", sop_uid, calling_ae_, why);
        ctx.audit->record("instance_refused", {{"calling_ae", calling_ae_},
                                               {"peer", peer_},
                                               {"sop_instance_uid", sop_uid},
                                               {"reason", why}});
        return status;
    }

    Uint16 store(const T_DIMSE_C_StoreRQ& req, DcmDataset* ds) {
        DcmFileFormat file(ds, OFFalse);  // owns ds from here
        const ReceiverContext* ctx = g_context.load();
        const std::string sop_uid = req.AffectedSOPInstanceUID;
        if (!ctx) return STATUS_STORE_Refused_OutOfResources;
        if (!isStorageClass(req.AffectedSOPClassUID))
            return refuse(*ctx, STATUS_STORE_Refused_SOPClassNotSupported,
                          "SOP class " + std::string(req.AffectedSOPClassUID) + " not accepted",
                          sop_uid);
        SeriesInfo s;
        s.sop_class_uid = text(*ds, DCM_SOPClassUID);
        s.study_uid = text(*ds, DCM_StudyInstanceUID);
        s.series_uid = text(*ds, DCM_SeriesInstanceUID);
        s.modality = text(*ds, DCM_Modality);
        s.body_part = text(*ds, DCM_BodyPartExamined);
        s.series_description = text(*ds, DCM_SeriesDescription);
        s.calling_ae = calling_ae_;
        s.peer = peer_;
        Sint32 frames = 1;
        if (ds->findAndGetSint32(DCM_NumberOfFrames, frames).bad() || frames < 1) frames = 1;
        s.frames_per_instance = frames;
        // Whatever a later message quotes (a description, a file name), the log and the audit
        // trail replace this patient's identifiers with [PHI].
        for (const DcmTagKey& tag : {DCM_PatientName, DCM_PatientID, DCM_PatientBirthDate})
            if (const std::string v = text(*ds, tag); v.size() >= 3) log::registerIdentifier(v);
        const std::string ds_sop = text(*ds, DCM_SOPInstanceUID);
        if (ds_sop != sop_uid || s.sop_class_uid != req.AffectedSOPClassUID)
            return refuse(*ctx, STATUS_STORE_Error_DataSetDoesNotMatchSOPClass,
                          "SOP class/instance in the dataset differ from the request", sop_uid);
        if (s.series_uid.empty() || s.study_uid.empty())
            return refuse(*ctx, STATUS_STORE_Error_DataSetDoesNotMatchSOPClass,
                          "no StudyInstanceUID or SeriesInstanceUID", sop_uid);
        if (diskGuardActive(*ctx))
            return refuse(*ctx, STATUS_STORE_Refused_OutOfResources,
                          "out of resources: spool free space below min_free_mb", sop_uid);
        auto path = ctx->spool->beginInstance(s, sop_uid);
        if (!path.isOk())
            return refuse(*ctx, STATUS_STORE_Refused_OutOfResources, path.status().toString(),
                          sop_uid);
        Status written = [&]() -> Status {
            const E_TransferSyntax xfer = ds->getOriginalXfer();
            if (ctx->key) {  // serialised in memory, only the ciphertext reaches the disk
                VOXSEG_ASSIGN_OR_RETURN(MemoryFile mem, MemoryFile::create("instance", {}));
                OFCondition c = file.saveFile(mem.path().c_str(), xfer);
                if (c.bad()) return ioError(std::string("cannot serialise: ") + c.text(), *path);
                VOXSEG_ASSIGN_OR_RETURN(std::string plain, mem.contents());
                return writeEncryptedFile(*ctx->key, *path, plain);  // fsync + rename
            }
            AtomicFile out(*path);
            OFCondition c = file.saveFile(out.tempPath().c_str(), xfer);
            if (c.bad()) return ioError(std::string("cannot write: ") + c.text(), *path);
            return out.commit();  // fsync + rename: only now may the sender forget it
        }();
        ctx->spool->endInstance(s.series_uid);
        if (!written.isOk())
            return refuse(*ctx, STATUS_STORE_Refused_OutOfResources, written.toString(), sop_uid);
        ++ctx->metrics->instances_received;
        return STATUS_Success;
    }

    std::string calling_ae_;
    std::string peer_;
    Refusal refusal_ = Refusal::kNone;
};

}  // namespace

bool diskGuardActive(const ReceiverContext& ctx) {
    std::error_code ec;
    const auto space = fs::space(ctx.spool->root(), ec);
    if (ec) return false;
    ctx.metrics->disk_free_bytes = static_cast<int64_t>(space.available);
    const bool active = space.available < ctx.config->min_free_bytes;
    const bool was = ctx.metrics->disk_guard.exchange(active);
    if (active && !was)
        log::warning(kComponent,
                     "spool free space {} MiB below the guard {} MiB: refusing new associations",
                     space.available >> 20, ctx.config->min_free_bytes >> 20);
    if (!active && was)
        log::info(kComponent, "spool free space {} MiB above the guard again: accepting",
                  space.available >> 20);
    return active;
}

struct Receiver::Impl {
    ReceiverContext context;
    DcmSCPPool<NodeScp> pool;
    std::unique_ptr<TlsLayer> tls;
    std::thread thread;
    OFCondition result = EC_Normal;
};

Receiver::Receiver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Receiver::~Receiver() {
    stop();
    impl_.reset();  // the pool's destructor waits for associations still running
    g_context = nullptr;
}

Result<std::unique_ptr<Receiver>> Receiver::start(const ReceiverContext& context) {
    auto impl = std::make_unique<Impl>();
    impl->context = context;
    const NodeConfig& c = *context.config;
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
    OFList<OFString> xfers;
    for (const char* ts : kTransferSyntaxes) xfers.push_back(ts);
    for (const char* sop : kStorageClasses)
        if (cfg.addPresentationContext(sop, xfers).bad())
            return internalError(std::string("cannot add presentation context ") + sop);
    OFList<OFString> echo_xfers;
    echo_xfers.push_back(UID_LittleEndianExplicitTransferSyntax);
    echo_xfers.push_back(UID_LittleEndianImplicitTransferSyntax);
    if (cfg.addPresentationContext(UID_VerificationSOPClass, echo_xfers).bad())
        return internalError("cannot add the verification presentation context");
    if (c.tls.enabled) {
        VOXSEG_ASSIGN_OR_RETURN(impl->tls, TlsLayer::create(c.tls, /*server=*/true));
        cfg.setTransportLayer(impl->tls->layer());
    }
    const ReceiverContext* expected = nullptr;
    if (!g_context.compare_exchange_strong(expected, &impl->context))
        return internalError("a DICOM receiver is already running in this process");
    Impl* raw = impl.get();
    // Fail early when the port is taken: the pool would only log it from its thread.
    {
        T_ASC_Network* probe = nullptr;
        OFCondition cond = ASC_initializeNetwork(NET_ACCEPTOR, c.port, 1, &probe);
        if (cond.bad()) {
            g_context = nullptr;
            return ioError("cannot listen on port " + std::to_string(c.port) + ": " + cond.text(),
                           c.file);
        }
        ASC_dropNetwork(&probe);
    }
    raw->thread = std::thread([raw] { raw->result = raw->pool.listen(); });
    log::info(kComponent, "listening as {} on port {}{} ({} associations at once)", c.ae_title,
              c.port, c.tls.enabled ? " (TLS)" : "", c.max_associations);
    return std::unique_ptr<Receiver>(new Receiver(std::move(impl)));
}

void Receiver::stop() {
    if (!impl_ || !impl_->thread.joinable()) return;
    impl_->pool.stopAfterCurrentAssociations();
    impl_->thread.join();
}

}  // namespace voxseg::node
