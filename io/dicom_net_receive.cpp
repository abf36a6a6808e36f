#include "io/dicom_net_receive.h"

#include "core/file_io.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcostrma.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrae.h>
#include <dcmtk/dcmdata/dcvrobow.h>
#include <dcmtk/dcmdata/dcvrsh.h>
#include <dcmtk/dcmdata/dcvrui.h>
#include <dcmtk/dcmdata/dcvrul.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace voxseg::io {
namespace {

// DCMTK's output stream over a file descriptor, keeping the errno of a failed write (DCMTK's own
// file stream drops it, and reports a full disk as "I/O suspension or premature end of
// stream"). Unbuffered: DIMSE hands it whole PDVs.
class FdConsumer : public DcmConsumer {
  public:
    explicit FdConsumer(int fd) : fd_(fd) {}
    OFBool good() const override { return error_ == 0; }
    OFCondition status() const override { return good() ? EC_Normal : EC_InvalidStream; }
    OFBool isFlushed() const override { return OFTrue; }
    offile_off_t avail() const override { return good() ? offile_off_t{1} << 30 : 0; }
    offile_off_t write(const void* buf, offile_off_t len) override {
        if (!good()) return 0;
        size_t done = 0;
        error_ = writeAllBytes(fd_, buf, static_cast<size_t>(len), &done);
        return static_cast<offile_off_t>(done);
    }
    void flush() override {}
    int error() const { return error_; }

  private:
    int fd_;
    int error_ = 0;
};

struct FdConsumerHolder {
    explicit FdConsumerHolder(int fd) : consumer(fd) {}
    FdConsumer consumer;
};

class FdOutputStream : private FdConsumerHolder, public DcmOutputStream {
  public:
    explicit FdOutputStream(int fd) : FdConsumerHolder(fd), DcmOutputStream(&consumer) {}
    int error() const { return consumer.error(); }
};

// The file meta information DCMTK's storescp writes before a data set received to file
// (DIMSE_createFilestream): the request's SOP class and instance, the accepted transfer syntax.
OFCondition writeMetaHeader(DcmOutputStream& out, const T_DIMSE_C_StoreRQ& req,
                            const char* transfer_syntax, const char* calling_ae) {
    DcmMetaInfo meta;
    auto* group_length = new DcmUnsignedLong(DcmTag(DCM_FileMetaInformationGroupLength));
    meta.insert(group_length, OFTrue);
    group_length->putUint32(0);
    auto* version = new DcmOtherByteOtherWord(DcmTag(DCM_FileMetaInformationVersion));
    meta.insert(version, OFTrue);
    const Uint8 version_bytes[2] = {0, 1};
    version->putUint8Array(version_bytes, 2);
    auto putString = [&meta](DcmElement* e, const char* value) {
        meta.insert(e, OFTrue);
        e->putString(value);
    };
    putString(new DcmUniqueIdentifier(DcmTag(DCM_MediaStorageSOPClassUID)),
              req.AffectedSOPClassUID);
    putString(new DcmUniqueIdentifier(DcmTag(DCM_MediaStorageSOPInstanceUID)),
              req.AffectedSOPInstanceUID);
    putString(new DcmUniqueIdentifier(DcmTag(DCM_TransferSyntaxUID)), transfer_syntax);
    putString(new DcmUniqueIdentifier(DcmTag(DCM_ImplementationClassUID)),
              OFFIS_IMPLEMENTATION_CLASS_UID);
    putString(new DcmShortString(DcmTag(DCM_ImplementationVersionName)),
              OFFIS_DTK_IMPLEMENTATION_VERSION_NAME2);
    putString(new DcmApplicationEntity(DcmTag(DCM_SourceApplicationEntityTitle)), calling_ae);
    OFCondition cond = meta.computeGroupLengthAndPadding(
        EGL_withGL, EPD_noChange, EXS_LittleEndianExplicit, EET_UndefinedLength);
    if (cond.bad()) return cond;
    meta.transferInit();
    cond = meta.write(out, EXS_LittleEndianExplicit, EET_ExplicitLength, nullptr);
    meta.transferEnd();
    return cond;
}

}  // namespace

ReceiveFile::~ReceiveFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!kept_ && !in_memory_ && !path_.empty()) ::unlink(path_.c_str());
}

Status ReceiveFile::open(const std::string& dir, bool in_memory) {
    in_memory_ = in_memory;
    if (in_memory) {
        fd_ = ::memfd_create("voxseg-received", MFD_CLOEXEC);
        if (fd_ < 0)
            return ioError(std::string("cannot create a memory file: ") + std::strerror(errno));
        path_ = "/proc/self/fd/" + std::to_string(fd_);
        return Status::ok();
    }
    std::string pattern = (std::filesystem::path(dir) / "received-XXXXXX").string();
    fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
    if (fd_ < 0)
        return ioError(std::string("cannot create a file to receive into: ") + std::strerror(errno),
                       dir);
    path_ = pattern;
    return Status::ok();
}

Status ReceiveFile::finish() {
    if (in_memory_) return Status::ok();
    const int rc = ::fsync(fd_);
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ioError(std::string("cannot flush: ") + std::strerror(err), path_);
    return Status::ok();
}

Status ReceiveFile::keep(const std::string& target) {
    if (in_memory_) return internalError("a memory file cannot be moved", target);
    std::error_code ec;
    std::filesystem::rename(path_, target, ec);
    if (ec) return ioError("cannot move the received instance: " + ec.message(), target);
    kept_ = true;
    return Status::ok();
}

OFCondition receiveDataSet(T_ASC_Association* assoc, const T_DIMSE_C_StoreRQ& req,
                           T_ASC_PresentationContextID pres_id, T_DIMSE_BlockingMode blocking,
                           int timeout, const std::string& dir, bool in_memory, ReceiveFile& file,
                           Status& problem) {
    auto failed = [&](const Status& why) -> OFCondition {
        problem = Status(why.code(), "receiving the instance: " + why.message());
        DIC_UL bytes = 0, pdvs = 0;
        return DIMSE_ignoreDataSet(assoc, blocking, timeout, &bytes, &pdvs);
    };
    T_ASC_PresentationContext pc;
    if (ASC_findAcceptedPresentationContext(assoc->params, pres_id, &pc).bad())
        return DIMSE_BADMESSAGE;
    if (Status s = file.open(dir, in_memory); !s.isOk()) return failed(s);
    FdOutputStream out(file.fd());
    OFCondition cond = writeMetaHeader(out, req, pc.acceptedTransferSyntax,
                                       assoc->params->DULparams.callingAPTitle);
    if (out.error() != 0) return failed(ioError(std::strerror(out.error())));
    if (cond.bad()) return failed(internalError(std::string("meta header: ") + cond.text()));
    T_ASC_PresentationContextID data_pres_id = pres_id;
    cond =
        DIMSE_receiveDataSetInFile(assoc, blocking, timeout, &data_pres_id, &out, nullptr, nullptr);
    if (out.error() != 0) {
        // DIMSE read the rest of the data set off the network after the write failed, and
        // then reports "out of resources"; anything else is the network's failure.
        problem = ioError(std::string("receiving the instance: ") + std::strerror(out.error()));
        return cond.code() == DIMSEC_OUTOFRESOURCES ? EC_Normal : cond;
    }
    if (cond.bad()) return cond;
    if (data_pres_id != pres_id)
        return makeDcmnetCondition(DIMSEC_INVALIDPRESENTATIONCONTEXTID, OF_error,
                                   "DIMSE: Presentation Contexts of Command and Data Set differ");
    if (Status s = file.finish(); !s.isOk())
        problem = Status(s.code(), "receiving the instance: " + s.message());
    return EC_Normal;
}

}  // namespace voxseg::io
