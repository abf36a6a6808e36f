#include "io/image_io.h"

#include "core/atomic_file.h"
#include "core/file_io.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/memory_limit.h"
#include "io/gzip_reader.h"
#include "io/metaimage_header.h"
#include "io/nifti_gz_writer.h"
#include "io/nifti_header_checks.h"
#include "io/nrrd_data.h"

#include <fcntl.h>
#include <itkCommand.h>
#include <itkImageFileReader.h>
#include <itkImageFileWriter.h>
#include <itkImageIOBase.h>
#include <itkImageIOFactory.h>
#include <itkMetaImageIO.h>
#include <itkNiftiImageIO.h>
#include <itkNrrdImageIO.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace voxseg::io {
namespace fs = std::filesystem;

namespace {

constexpr const char* kComponent = "io.image";
// MetaImage writes doubles with 6 significant digits unless told: enough to lose 1e-4 mm.
constexpr unsigned kMetaImageDoublePrecision = 17;

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Forwards ITK's progress events to a voxseg Progress.
class ProgressForwarder : public itk::Command {
  public:
    using Self = ProgressForwarder;
    using Pointer = itk::SmartPointer<Self>;
    itkNewMacro(Self);
    void set(const Progress* progress, const char* stage) {
        progress_ = progress;
        stage_ = stage;
    }
    void Execute(itk::Object* caller, const itk::EventObject& event) override {
        Execute(static_cast<const itk::Object*>(caller), event);
    }
    void Execute(const itk::Object* caller, const itk::EventObject& event) override {
        if (!progress_ || !itk::ProgressEvent().CheckEvent(&event)) return;
        const auto* process = dynamic_cast<const itk::ProcessObject*>(caller);
        if (process) progress_->report(process->GetProgress(), stage_);
    }

  private:
    const Progress* progress_ = nullptr;
    const char* stage_ = "";
};

// Runs ITK reading code: its exceptions become out of memory or corrupt data (`what` + ITK's
// description) naming `path`.
template <typename Fn>
Status itkRead(const std::string& path, const char* what, Fn&& fn) {
    try {
        fn();
    } catch (const itk::MemoryAllocationError&) {
        return Status(StatusCode::kOutOfMemory, "out of memory reading image", path);
    } catch (const itk::ExceptionObject& e) {
        return corruptData(what + std::string(e.GetDescription()), path);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory reading image", path);
    }
    return Status::ok();
}

// A NRRD's raw or gzip data read by voxseg into the image ITK's reader describes (geometry and
// all, from the header NrrdIO parsed): nullopt for ASCII, hex and multi-file data, which NrrdIO
// then reads (io/nrrd_data.h says why). 64-bit integers come in as T = double, as ITK converts.
template <typename T>
Result<std::optional<Volume>> readNrrdDirect(itk::ImageFileReader<Image3<T>>& reader,
                                             itk::ImageIOBase* image_io, const std::string& path,
                                             const Progress& progress) {
    typename Image3<T>::Pointer image;
    VOXSEG_RETURN_IF_ERROR(itkRead(path, "cannot read image header: ", [&] {
        reader.UpdateOutputInformation();
        image = Image3<T>::New();
        image->CopyInformation(reader.GetOutput());
        image->SetRegions(reader.GetOutput()->GetLargestPossibleRegion());
        image->Allocate(false);
    }));
    const auto values = static_cast<int64_t>(image_io->GetImageSizeInComponents());
    const auto size = static_cast<int>(image_io->GetComponentSize());
    T* dst = image->GetBufferPointer();
    using C = itk::IOComponentEnum;
    const C type = image_io->GetComponentType();
    const bool floating = type == C::FLOAT || type == C::DOUBLE;
    if (type == itk::ImageIOBase::MapPixelType<T>::CType) {
        VOXSEG_ASSIGN_OR_RETURN(const bool read, readNrrdData(path, dst, values * size, size,
                                                              values, floating, progress));
        if (!read) return std::optional<Volume>();
    } else {
        if (size != 8) return internalError("unexpected NRRD component size", path);
        std::vector<int64_t> wide(static_cast<size_t>(values));
        VOXSEG_ASSIGN_OR_RETURN(const bool read, readNrrdData(path, wide.data(), values * 8, 8,
                                                              values, false, progress));
        if (!read) return std::optional<Volume>();
        const bool is_signed = type == C::LONG || type == C::LONGLONG;
        for (int64_t i = 0; i < values; ++i)
            dst[i] = is_signed ? static_cast<T>(wide[i])
                               : static_cast<T>(static_cast<uint64_t>(wide[i]));
    }
    VolumeInfo info;
    info.source = path;
    return std::optional<Volume>(Volume::fromImage<T>(image, std::move(info)));
}

template <typename T>
Result<Volume> readTyped(const std::string& path, itk::ImageIOBase* image_io,
                         const Progress& progress) {
    using Reader = itk::ImageFileReader<Image3<T>>;
    auto reader = Reader::New();
    reader->SetFileName(path);
    reader->SetImageIO(image_io);
    if (imageFormatFromPath(path) == ImageFormat::kNrrd) {
        VOXSEG_ASSIGN_OR_RETURN(auto direct, readNrrdDirect<T>(*reader, image_io, path, progress));
        if (direct) return std::move(*direct);
    }
    auto forwarder = ProgressForwarder::New();
    forwarder->set(&progress, "reading image");
    reader->AddObserver(itk::ProgressEvent(), forwarder);
    VOXSEG_RETURN_IF_ERROR(itkRead(path, "cannot read image: ", [&] { reader->Update(); }));
    typename Image3<T>::Pointer image = reader->GetOutput();
    image->DisconnectPipeline();
    // The file's own header fields (NIfTI descrip/intent/qform codes, NRRD keys) would follow the
    // image into other writers, which warn about or misapply them; voxseg keeps what it needs
    // in Volume/VolumeInfo, so each write starts from a clean header.
    image->SetMetaDataDictionary(itk::MetaDataDictionary());
    VolumeInfo info;
    info.source = path;
    return Volume::fromImage<T>(image, std::move(info));
}

// 64-bit integer files (numpy's default int64 label maps saved by nibabel) have no voxseg pixel
// type: they come in as float64 and go to int32 when every value fits exactly.
Volume narrowWideIntegers(Volume v) {
    const double* p = v.data<double>();
    const int64_t n = v.geometry().voxelCount();
    for (int64_t i = 0; i < n; ++i) {
        if (p[i] != std::floor(p[i]) || p[i] < std::numeric_limits<int32_t>::min() ||
            p[i] > std::numeric_limits<int32_t>::max()) {
            v.info().warnings.push_back(
                "64-bit integer voxels outside the int32 range: kept as float64");
            return v;
        }
    }
    return v.castTo(PixelType::kInt32);
}

// Why writing `need` bytes into `dir` failed, in the system's words: `saved_errno` (taken right
// after ITK gave up) when it is a write error, else what the file system and the file size
// limit say (ITK's NrrdIO and MetaIO report only "fwrite wrote only N things"); empty when
// nothing explains it.
std::string writeFailureReason(int saved_errno, const fs::path& dir, uintmax_t need) {
    switch (saved_errno) {
        case ENOSPC:
        case EFBIG:
        case EDQUOT:
        case EIO:
        case EROFS:
        case EACCES:
        case EPERM:
        case ENOENT:
            return std::strerror(saved_errno);
        default:
            break;
    }
    struct statvfs fs_info {};
    if (::statvfs((dir.empty() ? fs::path(".") : dir).c_str(), &fs_info) == 0 &&
        static_cast<uintmax_t>(fs_info.f_bavail) * fs_info.f_frsize < need)
        return std::strerror(ENOSPC);
    rlimit fsize{};
    if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        fsize.rlim_cur < need)
        return std::strerror(EFBIG);
    return saved_errno != 0 ? std::strerror(saved_errno) : "";
}

// ITK's description of a failed write, for a message about `target`: its last line (NrrdIO's
// "[nrrd] ..." trail ends with what failed), the temporary file's name replaced by the target's.
std::string itkWriteDetail(std::string description, const std::string& path,
                           const std::string& target) {
    for (size_t at = 0; (at = description.find(path, at)) != std::string::npos; at += target.size())
        description.replace(at, path.size(), target);
    std::vector<std::string> lines;
    std::string line;
    for (char c : description + "\n") {
        if (c != '\n') {
            line += c;
        } else if (!line.empty() && line.find_first_not_of(" \t") != std::string::npos) {
            lines.push_back(line);
            line.clear();
        } else {
            line.clear();
        }
    }
    return lines.empty() ? std::string() : lines.back();
}

// Writes through ITK into `path` (a temporary file of `target`, or `target` itself); failures
// name `target`, the file the user asked for, and the system's reason.
template <typename T>
Status writeWithItk(const Volume& volume, const std::string& path, ImageFormat format,
                    const Progress& progress, const std::string& target) {
    using Writer = itk::ImageFileWriter<Image3<T>>;
    auto writer = Writer::New();
    writer->SetFileName(path);
    // The writer updates its input's pipeline regions: it gets its own image object sharing the
    // voxels, so other threads may read the volume meanwhile (outputs are written side by side).
    auto shallow = Image3<T>::New();
    shallow->Graft(volume.image<T>());
    writer->SetInput(shallow);
    writer->SetUseCompression(false);
    if (format == ImageFormat::kMetaImage) {
        auto meta = itk::MetaImageIO::New();
        meta->SetDoublePrecision(kMetaImageDoublePrecision);
        writer->SetImageIO(meta);
    }
    auto forwarder = ProgressForwarder::New();
    forwarder->set(&progress, "writing image");
    writer->AddObserver(itk::ProgressEvent(), forwarder);
    errno = 0;
    try {
        writer->Update();
    } catch (const itk::ExceptionObject& e) {
        const int saved_errno = errno;
        const uintmax_t need = static_cast<uintmax_t>(volume.geometry().voxelCount()) *
                               pixelTypeSize(volume.pixelType());
        const std::string reason =
            writeFailureReason(saved_errno, fs::path(path).parent_path(), need);
        return ioError("cannot write image: " + (reason.empty() ? "" : reason + " (") +
                           itkWriteDetail(e.GetDescription(), path, target) +
                           (reason.empty() ? "" : ")"),
                       target);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory writing image", target);
    }
    return Status::ok();
}

Status writeDispatch(const Volume& volume, const std::string& path, ImageFormat format,
                     const Progress& progress, const std::string& target) {
    switch (volume.pixelType()) {
        case PixelType::kUInt8:
            return writeWithItk<uint8_t>(volume, path, format, progress, target);
        case PixelType::kInt8:
            return writeWithItk<int8_t>(volume, path, format, progress, target);
        case PixelType::kUInt16:
            return writeWithItk<uint16_t>(volume, path, format, progress, target);
        case PixelType::kInt16:
            return writeWithItk<int16_t>(volume, path, format, progress, target);
        case PixelType::kUInt32:
            return writeWithItk<uint32_t>(volume, path, format, progress, target);
        case PixelType::kInt32:
            return writeWithItk<int32_t>(volume, path, format, progress, target);
        case PixelType::kFloat32:
            return writeWithItk<float>(volume, path, format, progress, target);
        case PixelType::kFloat64:
            return writeWithItk<double>(volume, path, format, progress, target);
    }
    return internalError("unknown pixel type", target);
}

// ITK's NIfTI writer reports a short write (disk full, file size limit) on stderr only ("NWAD:
// wrote only ...") and returns normally; NRRD/MetaImage are written uncompressed too. So the
// voxel bytes must all be in the file ITK wrote, or the output is refused.
Status checkWrittenSize(const Volume& volume, const std::string& written,
                        const std::string& target) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(written, ec);
    const uintmax_t need =
        static_cast<uintmax_t>(volume.geometry().voxelCount()) * pixelTypeSize(volume.pixelType());
    if (ec || size < need) {
        const std::string reason = writeFailureReason(0, fs::path(written).parent_path(), need);
        return ioError("write incomplete: " + std::to_string(ec ? 0 : size) + " of at least " +
                           std::to_string(need) + " bytes reached the disk (" +
                           (reason.empty() ? "disk full or file size limit?" : reason) + ")",
                       target);
    }
    return Status::ok();
}

// .nii/.nii.gz of volumes above this size: ITK writes the header only (below), voxseg the voxels.
// Smaller volumes are written by ITK whole; the header detour would not pay.
constexpr uint64_t kDirectNiftiMinBytes = uint64_t{4} << 20;
// The .nii voxels go out in pieces of this size, each handed to write-back as soon as it is in
// the page cache (sync_file_range), so the disk writes while the next piece is copied and the
// fsync of the commit waits for the tail only.
constexpr size_t kNiftiWritePiece = size_t{16} << 20;

int16_t load16(const uint8_t* p) {
    int16_t v = 0;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// ITK's NIfTI-1 header for `volume`, exactly as ITK writes it before the voxels: ITK writes a
// two-slice image of the same voxel type, in-plane size, spacing, origin and direction to a
// temporary file beside `target`, and its bytes up to vox_offset, with dim[3] set to the real
// slice count, are the header. Nothing else in the header ITK 5.2 writes depends on the slice
// count: no data statistics (cal_min/max stay 0), no slice_end (the ctest image_io_nifti_identity,
// bench/nifti_identity_check.cpp, checks the files are byte-identical to ITK's whole-volume output
// for every voxel type). Returns an empty vector when this does not apply (few slices, dimensions
// beyond NIfTI-1's int16, an unexpected layout): then ITK writes the whole volume as before.
template <typename T>
Result<std::vector<uint8_t>> itkNiftiHeaderTyped(const Volume& volume, const std::string& target) {
    const Geometry g = volume.geometry();
    if (g.size[2] <= 2 || g.size[0] > 32767 || g.size[1] > 32767 || g.size[2] > 32767)
        return std::vector<uint8_t>{};
    Geometry two = g;
    two.size[2] = 2;
    const Volume slab = Volume::allocate<T>(two);
    const fs::path t(target);
    AtomicFile scratch((t.parent_path() / (t.filename().string() + ".header.nii")).string());
    // A failure here only means ITK writes the whole volume (and reports real problems with the
    // target itself). A scratch name beyond NAME_MAX is not even tried (niftilib would print).
    constexpr size_t kNameMax = 255;
    if (fs::path(scratch.tempPath()).filename().string().size() > kNameMax ||
        !writeWithItk<T>(slab, scratch.tempPath(), ImageFormat::kNifti, {}, target).isOk())
        return std::vector<uint8_t>{};
    // The header, up to vox_offset; the file must hold exactly that plus the two slices.
    std::vector<uint8_t> bytes(352);
    std::ifstream in(scratch.tempPath(), std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), 352)) return std::vector<uint8_t>{};
    constexpr int kDim = 40;  // dim[0..7], int16 each
    constexpr int kVoxOffset = 108;
    int32_t sizeof_hdr = 0;
    float vox_offset = 0;
    std::memcpy(&sizeof_hdr, bytes.data(), sizeof sizeof_hdr);
    std::memcpy(&vox_offset, bytes.data() + kVoxOffset, sizeof vox_offset);
    if (sizeof_hdr != 348 || !(vox_offset >= 352 && vox_offset < 65536))
        return std::vector<uint8_t>{};
    const auto header_size = static_cast<size_t>(vox_offset);
    bytes.resize(header_size);
    if (header_size > 352 && !in.read(reinterpret_cast<char*>(bytes.data()) + 352,
                                      static_cast<std::streamsize>(header_size - 352)))
        return std::vector<uint8_t>{};
    std::error_code ec;
    const uintmax_t file_size = fs::file_size(scratch.tempPath(), ec);
    const uint64_t slab_bytes = static_cast<uint64_t>(two.voxelCount()) * sizeof(T);
    if (ec || header_size != vox_offset || file_size != header_size + slab_bytes ||
        load16(bytes.data() + kDim) != 3 || load16(bytes.data() + kDim + 2) != g.size[0] ||
        load16(bytes.data() + kDim + 4) != g.size[1] || load16(bytes.data() + kDim + 6) != 2)
        return std::vector<uint8_t>{};
    const auto slices = static_cast<int16_t>(g.size[2]);
    std::memcpy(bytes.data() + kDim + 6, &slices, sizeof slices);
    return bytes;
}

Result<std::vector<uint8_t>> itkNiftiHeader(const Volume& volume, const std::string& target) {
    if (static_cast<uint64_t>(volume.geometry().voxelCount()) * pixelTypeSize(volume.pixelType()) <
        kDirectNiftiMinBytes)
        return std::vector<uint8_t>{};
    switch (volume.pixelType()) {
        case PixelType::kUInt8:
            return itkNiftiHeaderTyped<uint8_t>(volume, target);
        case PixelType::kInt8:
            return itkNiftiHeaderTyped<int8_t>(volume, target);
        case PixelType::kUInt16:
            return itkNiftiHeaderTyped<uint16_t>(volume, target);
        case PixelType::kInt16:
            return itkNiftiHeaderTyped<int16_t>(volume, target);
        case PixelType::kUInt32:
            return itkNiftiHeaderTyped<uint32_t>(volume, target);
        case PixelType::kInt32:
            return itkNiftiHeaderTyped<int32_t>(volume, target);
        case PixelType::kFloat32:
            return itkNiftiHeaderTyped<float>(volume, target);
        case PixelType::kFloat64:
            return itkNiftiHeaderTyped<double>(volume, target);
    }
    return std::vector<uint8_t>{};
}

std::span<const uint8_t> voxelBytes(const Volume& volume) {
    return {
        static_cast<const uint8_t*>(volume.rawData()),
        static_cast<size_t>(volume.geometry().voxelCount()) * pixelTypeSize(volume.pixelType())};
}

// Writes header + voxels to `path` (created or truncated, mode 0666 less the umask, as ITK's
// fopen does), starting write-back of each piece as it lands; the caller's commit() fsyncs.
Status writeNiftiFile(const std::vector<uint8_t>& header, const Volume& volume,
                      const std::string& path, const std::string& target,
                      const Progress& progress) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return ioError(std::string("cannot create: ") + std::strerror(errno), target);
    struct Closer {
        int fd;
        ~Closer() {
            if (fd >= 0) ::close(fd);
        }
    } closer{fd};
    auto writeAll = [&](const uint8_t* p, size_t n) { return writeAllBytes(fd, p, n) == 0; };
    const std::span<const uint8_t> data = voxelBytes(volume);
    if (!writeAll(header.data(), header.size()))
        return ioError(std::string("write failed: ") + std::strerror(errno), target);
    for (size_t done = 0; done < data.size();) {
        const size_t n = std::min(kNiftiWritePiece, data.size() - done);
        if (!writeAll(data.data() + done, n))
            return ioError(std::string("write failed (disk full?): ") + std::strerror(errno),
                           target);
        // Only a hint to start write-back early; errors surface in the commit's fsync.
        ::sync_file_range(fd, static_cast<off_t>(header.size() + done), static_cast<off_t>(n),
                          SYNC_FILE_RANGE_WRITE);
        done += n;
        progress.report(static_cast<double>(done) / static_cast<double>(data.size()),
                        "writing image");
        if (progress.isCancelled())
            return Status(StatusCode::kCancelled, "cancelled while writing", target);
    }
    if (::close(closer.fd) != 0) {
        closer.fd = -1;
        return ioError(std::string("close failed: ") + std::strerror(errno), target);
    }
    closer.fd = -1;
    return Status::ok();
}

bool isDetachedHeader(const std::string& path) {
    const std::string ext = imageExtension(path);
    return ext == ".nhdr" || ext == ".mhd";
}

// .nhdr/.mhd name a separate data file inside the header, so the single-file temp-and-rename of
// AtomicFile would leave the header pointing at the temporary name. Both files are written into
// a private temporary folder beside the target under their final names, then each is renamed
// into place (data first, header last), so the header never appears before its data.
Status writeDetached(const Volume& volume, const std::string& path, ImageFormat format,
                     const Progress& progress) {
    const fs::path target(path);
    const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::random_device rd;
    const fs::path tmp_dir = dir / (".tmp-" + std::to_string(rd()) + std::to_string(::getpid()) +
                                    "-" + target.filename().string() + ".d");
    std::error_code ec;
    if (!fs::create_directory(tmp_dir, ec) || ec)
        return ioError("cannot create a temporary folder beside the output: " + ec.message(), path);
    struct Cleanup {
        fs::path p;
        ~Cleanup() {
            std::error_code e;
            fs::remove_all(p, e);
        }
    } cleanup{tmp_dir};
    const fs::path tmp_header = tmp_dir / target.filename();
    VOXSEG_RETURN_IF_ERROR(writeDispatch(volume, tmp_header.string(), format, progress, path));
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(tmp_dir, ec))
        if (entry.path() != tmp_header) files.push_back(entry.path());
    files.push_back(tmp_header);
    for (const auto& f : files) {
        AtomicFile out((dir / f.filename()).string());
        fs::rename(f, out.tempPath(), ec);
        if (ec) return ioError("cannot move temporary output: " + ec.message(), path);
        VOXSEG_RETURN_IF_ERROR(out.commit());
    }
    return Status::ok();
}

}  // namespace

namespace {

struct ExtensionFormat {
    const char* extension;
    ImageFormat format;
};
// Longest first: ".nii.gz" before ".nii".
constexpr ExtensionFormat kImageExtensions[] = {
    {".nii.gz", ImageFormat::kNiftiGz}, {".nii", ImageFormat::kNifti},
    {".nrrd", ImageFormat::kNrrd},      {".nhdr", ImageFormat::kNrrd},
    {".mha", ImageFormat::kMetaImage},  {".mhd", ImageFormat::kMetaImage},
};

const ExtensionFormat* findExtension(const std::string& path) {
    const std::string p = lower(path);
    for (const ExtensionFormat& e : kImageExtensions)
        if (endsWith(p, e.extension)) return &e;
    return nullptr;
}

}  // namespace

const std::vector<std::string>& imageExtensions() {
    static const std::vector<std::string> list = [] {
        std::vector<std::string> out;
        for (const ExtensionFormat& e : kImageExtensions) out.emplace_back(e.extension);
        return out;
    }();
    return list;
}

std::string imageExtension(const std::string& path) {
    const ExtensionFormat* e = findExtension(path);
    return e ? e->extension : "";
}

ImageFormat imageFormatFromPath(const std::string& path) {
    const ExtensionFormat* e = findExtension(path);
    return e ? e->format : ImageFormat::kUnknown;
}

bool isImageFile(const std::string& path) {
    std::error_code ec;
    return imageFormatFromPath(path) != ImageFormat::kUnknown && fs::is_regular_file(path, ec);
}

namespace {

// ITK's reader for the format the file name says. Not ImageIOFactory: it picks a reader by
// content among every registered one, PNG included (linked for previews), and libpng aborts
// the process on a damaged PNG: "scan.nii.gz" holding a truncated PNG must be refused.
itk::ImageIOBase::Pointer imageIOForFormat(ImageFormat format) {
    switch (format) {
        case ImageFormat::kNifti:
        case ImageFormat::kNiftiGz:
            return itk::NiftiImageIO::New().GetPointer();
        case ImageFormat::kNrrd:
            return itk::NrrdImageIO::New().GetPointer();
        case ImageFormat::kMetaImage:
            return itk::MetaImageIO::New().GetPointer();
        case ImageFormat::kUnknown:
            break;
    }
    return nullptr;
}

// Finds ITK's reader for `path` and reads its header; refuses what voxseg cannot hold.
Result<itk::ImageIOBase::Pointer> openImageIO(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return notFound("image file not found", path);
    if (!fs::is_regular_file(path, ec))
        return invalidArgument("not a regular file (expected .nii, .nii.gz, .nrrd, .mha)", path);
    if (::access(path.c_str(), R_OK) != 0)
        return ioError(std::string("cannot read: ") + std::strerror(errno), path);
    const ImageFormat format = imageFormatFromPath(path);
    if (format == ImageFormat::kNifti || format == ImageFormat::kNiftiGz)
        VOXSEG_RETURN_IF_ERROR(checkNiftiHeaderFinite(path));
    if (format == ImageFormat::kMetaImage) VOXSEG_RETURN_IF_ERROR(checkMetaImageHeader(path));
    if (format == ImageFormat::kNrrd) VOXSEG_RETURN_IF_ERROR(checkNrrdLayout(path));
    itk::ImageIOBase::Pointer image_io;
    try {
        image_io = imageIOForFormat(format);
        if (!image_io || !image_io->CanReadFile(path.c_str()))
            return unsupported("not a NIfTI, NRRD or MetaImage file ITK can read", path);
        image_io->SetFileName(path);
        image_io->ReadImageInformation();
    } catch (const itk::ExceptionObject& e) {
        return corruptData(std::string("cannot read image header: ") + e.GetDescription(), path);
    }
    if (image_io->GetNumberOfComponents() != 1)
        return unsupported("images with " + std::to_string(image_io->GetNumberOfComponents()) +
                               " components per voxel (RGB/vector) are not supported: " +
                               "voxseg reads scalar volumes",
                           path);
    for (unsigned d = 3; d < image_io->GetNumberOfDimensions(); ++d) {
        if (image_io->GetDimensions(d) > 1)
            return unsupported("image has " + std::to_string(image_io->GetNumberOfDimensions()) +
                                   " dimensions (size " +
                                   std::to_string(image_io->GetDimensions(d)) + " along axis " +
                                   std::to_string(d) +
                                   "); voxseg works on 3D volumes: split it first",
                               path);
    }
    return image_io;
}

Result<PixelType> pixelTypeOfComponent(itk::IOComponentEnum c, const std::string& path) {
    using C = itk::IOComponentEnum;
    switch (c) {
        case C::UCHAR:
            return PixelType::kUInt8;
        case C::CHAR:
            return PixelType::kInt8;
        case C::USHORT:
            return PixelType::kUInt16;
        case C::SHORT:
            return PixelType::kInt16;
        case C::UINT:
            return PixelType::kUInt32;
        case C::INT:
            return PixelType::kInt32;
        case C::FLOAT:
            return PixelType::kFloat32;
        case C::DOUBLE:
            return PixelType::kFloat64;
        case C::LONG:
        case C::ULONG:
        case C::LONGLONG:
        case C::ULONGLONG:
            return PixelType::kInt32;  // narrowed when every value fits, else float64
        default:
            return unsupported(std::string("voxel type ") +
                                   itk::ImageIOBase::GetComponentTypeAsString(c) +
                                   " is not supported",
                               path);
    }
}

}  // namespace

const char* imageFormatName(ImageFormat format) {
    switch (format) {
        case ImageFormat::kNifti:
            return "NIfTI";
        case ImageFormat::kNiftiGz:
            return "NIfTI (gzip)";
        case ImageFormat::kNrrd:
            return "NRRD";
        case ImageFormat::kMetaImage:
            return "MetaImage";
        case ImageFormat::kUnknown:
            break;
    }
    return "unknown";
}

Result<ImageHeader> readImageHeader(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(auto image_io, openImageIO(path));
    ImageHeader h;
    h.format = imageFormatFromPath(path);
    VOXSEG_ASSIGN_OR_RETURN(h.pixel_type, pixelTypeOfComponent(image_io->GetComponentType(), path));
    const unsigned n = std::min(3u, image_io->GetNumberOfDimensions());
    for (unsigned axis = 0; axis < n; ++axis) {
        h.geometry.size[axis] = static_cast<int64_t>(image_io->GetDimensions(axis));
        h.geometry.spacing[axis] = image_io->GetSpacing(axis);
        h.geometry.origin[axis] = image_io->GetOrigin(axis);
        const auto dir = image_io->GetDirection(axis);  // the axis' unit vector (a column)
        for (unsigned r = 0; r < 3; ++r)
            h.geometry.direction[r * 3 + axis] = r < dir.size() ? dir[r] : (r == axis ? 1 : 0);
    }
    for (unsigned axis = n; axis < 3; ++axis) h.geometry.size[axis] = 1;
    return h;
}

namespace {

// The most memory reading an image holds at once, from its header: ITK's NIfTI reader reads the
// voxels into niftilib's buffer and copies them into the image (twice the voxels' bytes, as
// measured: docs/security.md); voxseg reads NRRD raw and gzip data straight into the image (64-bit
// integers through a second buffer); MetaIO reads into the image, compressed data beside it (at
// most the file). 64-bit integers then narrow to int32 beside the float64 image.
double readPeakBytes(const std::string& path, ImageFormat format, itk::ImageIOBase* image_io,
                     double voxel_bytes) {
    using C = itk::IOComponentEnum;
    const C type = image_io->GetComponentType();
    const bool wide =
        type == C::LONG || type == C::ULONG || type == C::LONGLONG || type == C::ULONGLONG;
    double peak = voxel_bytes;
    if (format == ImageFormat::kNifti || format == ImageFormat::kNiftiGz || wide) peak *= 2;
    if (format == ImageFormat::kMetaImage) {
        std::error_code ec;
        const auto size = fs::file_size(path, ec);
        if (!ec) peak += static_cast<double>(size);
    }
    return peak;
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / double(1 << 30)); }

// Before anything of the claimed size is allocated (issue 35, memory only after trust): what the
// header claims must be in the file (raw data) or able to come out of it (compressed data:
// deflate's 1032:1), then fit the memory this process may use (core/memory_limit.h: the machine,
// a cgroup's limit, ulimit -v), then, compressed, stay within --max-inflated-bytes.
Status checkClaim(const std::string& path, ImageFormat format, itk::ImageIOBase* image_io,
                  const std::string& dims) {
    const auto values = static_cast<int64_t>(image_io->GetImageSizeInComponents());
    const auto bytes = values * static_cast<int64_t>(image_io->GetComponentSize());
    bool compressed = false;
    const char* what = "";
    switch (format) {
        case ImageFormat::kNifti:
        case ImageFormat::kNiftiGz:
            VOXSEG_RETURN_IF_ERROR(checkNiftiClaim(path));
            compressed = format == ImageFormat::kNiftiGz;
            what = "the NIfTI's gzip stream";
            break;
        case ImageFormat::kNrrd: {
            using C = itk::IOComponentEnum;
            const C type = image_io->GetComponentType();
            VOXSEG_ASSIGN_OR_RETURN(
                compressed,
                checkNrrdDataClaim(path, bytes, values, type == C::FLOAT || type == C::DOUBLE));
            what = "the NRRD's gzip data";
            break;
        }
        case ImageFormat::kMetaImage: {
            VOXSEG_ASSIGN_OR_RETURN(compressed, checkMetaImageClaim(path));
            what = "the MetaImage's compressed data";
            break;
        }
        case ImageFormat::kUnknown:
            break;
    }
    const double peak = readPeakBytes(path, format, image_io, static_cast<double>(bytes));
    const uint64_t limit = memoryLimitBytes();
    if (limit > 0 && peak > static_cast<double>(limit))
        return Status(
            StatusCode::kOutOfMemory,
            fmt::format("the header claims {} voxels of {} ({} of voxels; reading takes {}), "
                        "more than the {}: refused before reading; run it where more memory is "
                        "free (a larger machine, a higher container or ulimit -v limit)",
                        dims,
                        itk::ImageIOBase::GetComponentTypeAsString(image_io->GetComponentType()),
                        gib(static_cast<double>(bytes)), gib(peak), describeMemoryLimit()),
            path);
    if (compressed) VOXSEG_RETURN_IF_ERROR(checkInflatedLimit(path, what, bytes));
    return Status::ok();
}

}  // namespace

Result<Volume> readImage(const std::string& path, const Progress& progress, int64_t max_voxels) {
    VOXSEG_ASSIGN_OR_RETURN(auto image_io, openImageIO(path));
    // A header that claims more voxels than any volume voxseg decodes is refused before the
    // reader allocates (as loadSeries does for DICOM: io/dicom_series.h).
    double voxels = 1;
    std::string dims;
    for (unsigned d = 0; d < image_io->GetNumberOfDimensions(); ++d) {
        voxels *= static_cast<double>(image_io->GetDimensions(d));
        dims += (d ? " x " : "") + std::to_string(image_io->GetDimensions(d));
    }
    voxels *= image_io->GetNumberOfComponents();
    if (voxels > static_cast<double>(max_voxels))
        return unsupported(std::filesystem::path(path).filename().string() + " claims " + dims +
                               " voxels (" + fmt::format("{:.2g}", voxels) + ") > limit " +
                               fmt::format("{:.2g}", static_cast<double>(max_voxels)) +
                               "; raise --max-voxels if this is real",
                           path);
    const ImageFormat format = imageFormatFromPath(path);
    VOXSEG_RETURN_IF_ERROR(checkClaim(path, format, image_io, dims));
    const bool is_nifti = format == ImageFormat::kNifti || format == ImageFormat::kNiftiGz;
    std::future<Status> complete;
    if (is_nifti) complete = std::async(std::launch::async, checkNiftiComplete, path);
    if (format == ImageFormat::kMetaImage) {
        // ITK 5.2 reads a MetaImage that is not 3-D (a 2-D one, a 4-D one's first volume) through
        // MetaImage::ReadROI, whose MET_UncompressStream loops forever on compressed data that
        // ends short of DimSize (fuzz_image_mha: `voxseg convert` hung). Those are inflated and
        // checked first; a 3-D one goes through MetaImage::Read, which returns, so its check runs
        // beside the read.
        if (image_io->GetNumberOfDimensions() != 3)
            VOXSEG_RETURN_IF_ERROR(checkMetaImageData(path));
        else
            complete = std::async(std::launch::async, checkMetaImageData, path);
    }
    using C = itk::IOComponentEnum;
    Result<Volume> result = internalError("unhandled component type", path);
    switch (image_io->GetComponentType()) {
        case C::UCHAR:
            result = readTyped<uint8_t>(path, image_io, progress);
            break;
        case C::CHAR:
            result = readTyped<int8_t>(path, image_io, progress);
            break;
        case C::USHORT:
            result = readTyped<uint16_t>(path, image_io, progress);
            break;
        case C::SHORT:
            result = readTyped<int16_t>(path, image_io, progress);
            break;
        case C::UINT:
            result = readTyped<uint32_t>(path, image_io, progress);
            break;
        case C::INT:
            result = readTyped<int32_t>(path, image_io, progress);
            break;
        case C::FLOAT:
            result = readTyped<float>(path, image_io, progress);
            break;
        case C::DOUBLE:
            result = readTyped<double>(path, image_io, progress);
            break;
        case C::LONG:
        case C::ULONG:
        case C::LONGLONG:
        case C::ULONGLONG:
            result = readTyped<double>(path, image_io, progress);
            if (result.isOk()) result = narrowWideIntegers(std::move(result).value());
            break;
        default:
            result = unsupported(
                std::string("voxel type ") +
                    itk::ImageIOBase::GetComponentTypeAsString(image_io->GetComponentType()) +
                    " is not supported",
                path);
            break;
    }
    if (complete.valid()) {
        const Status st = complete.get();
        if (!st.isOk()) return st;
    }
    if (result.isOk()) {
        progress.report(1.0, "reading image");
        for (const auto& w : result->info().warnings) log::warning(kComponent, "{}: {}", path, w);
    }
    return result;
}

Status writeImage(const Volume& volume, const std::string& path, const ImageWriteOptions& options,
                  const Progress& progress) {
    if (volume.empty()) return invalidArgument("no image to write", path);
    const ImageFormat format = imageFormatFromPath(path);
    if (format == ImageFormat::kUnknown)
        return invalidArgument(
            "unknown output format: use a name ending in .nii.gz, .nii, .nrrd, .nhdr, .mha or .mhd",
            path);
    std::error_code ec;
    if (!options.overwrite && fs::exists(path, ec))
        return Status(StatusCode::kFailedPrecondition, "output exists (overwrite not allowed)",
                      path);
    if (fs::is_directory(path, ec))
        return invalidArgument("output is a folder: give a file name", path);
    AtomicFile out(path);
    VOXSEG_RETURN_IF_ERROR(out.checkWritable());
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());

    if (isDetachedHeader(path)) return writeDetached(volume, path, format, progress);

    if (format == ImageFormat::kNifti || format == ImageFormat::kNiftiGz) {
        // Large volumes: ITK's header, voxseg's voxels (straight from memory, no ITK copy; for
        // .nii.gz no uncompressed temporary file written and read back). Same bytes as ITK.
        VOXSEG_ASSIGN_OR_RETURN(const std::vector<uint8_t> header, itkNiftiHeader(volume, path));
        if (!header.empty() && format == ImageFormat::kNifti) {
            VOXSEG_RETURN_IF_ERROR(writeNiftiFile(header, volume, out.tempPath(), path, progress));
            VOXSEG_RETURN_IF_ERROR(checkWrittenSize(volume, out.tempPath(), path));
            return out.commit();
        }
        if (!header.empty()) {
            ParallelGzipOptions gz;
            gz.level = std::clamp(options.compression_level, 1, 12);
            gz.threads = options.threads;
            const std::span<const uint8_t> parts[] = {header, voxelBytes(volume)};
            Status st = gzipBuffersParallel(parts, out.tempPath(), gz, progress);
            if (!st.isOk()) return Status(st.code(), st.message(), path);
            return out.commit();
        }
    }

    if (format != ImageFormat::kNiftiGz) {
        VOXSEG_RETURN_IF_ERROR(writeDispatch(volume, out.tempPath(), format, progress, path));
        VOXSEG_RETURN_IF_ERROR(checkWrittenSize(volume, out.tempPath(), path));
        return out.commit();
    }

    // .nii.gz: ITK writes the uncompressed .nii beside the target (geometry and header stay
    // ITK's), then it is compressed in parallel. The uncompressed file is never committed; its
    // AtomicFile removes it on every path.
    AtomicFile raw(path.substr(0, path.size() - 3));
    VOXSEG_RETURN_IF_ERROR(
        writeDispatch(volume, raw.tempPath(), ImageFormat::kNifti, progress.sub(0.0, 0.2), path));
    VOXSEG_RETURN_IF_ERROR(checkWrittenSize(volume, raw.tempPath(), path));
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
    ParallelGzipOptions gz;
    gz.level = std::clamp(options.compression_level, 1, 12);
    gz.threads = options.threads;
    Status st = gzipFileParallel(raw.tempPath(), out.tempPath(), gz, progress.sub(0.2, 1.0));
    if (!st.isOk()) return Status(st.code(), st.message(), path);
    return out.commit();
}

}  // namespace voxseg::io
