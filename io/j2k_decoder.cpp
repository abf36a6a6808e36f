#include "io/j2k_decoder.h"

#include <fmt/format.h>
// Explicit path: ITK puts its own, symbol-mangled OpenJPEG 1.x headers on the include path.
#include <openjpeg-2.5/openjpeg.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace voxseg::io::detail {
namespace {

struct MemoryStream {
    const uint8_t* data;
    uint64_t size;
    uint64_t position;
};

OPJ_SIZE_T readStream(void* buffer, OPJ_SIZE_T bytes, void* user) {
    auto* s = static_cast<MemoryStream*>(user);
    if (s->position >= s->size) return static_cast<OPJ_SIZE_T>(-1);
    const uint64_t n = std::min<uint64_t>(bytes, s->size - s->position);
    std::memcpy(buffer, s->data + s->position, n);
    s->position += n;
    return static_cast<OPJ_SIZE_T>(n);
}

OPJ_OFF_T skipStream(OPJ_OFF_T bytes, void* user) {
    auto* s = static_cast<MemoryStream*>(user);
    if (bytes < 0) {
        const uint64_t back = std::min<uint64_t>(static_cast<uint64_t>(-bytes), s->position);
        s->position -= back;
        return -static_cast<OPJ_OFF_T>(back);
    }
    const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(bytes), s->size - s->position);
    s->position += n;
    return static_cast<OPJ_OFF_T>(n);
}

OPJ_BOOL seekStream(OPJ_OFF_T position, void* user) {
    auto* s = static_cast<MemoryStream*>(user);
    if (position < 0 || static_cast<uint64_t>(position) > s->size) return OPJ_FALSE;
    s->position = static_cast<uint64_t>(position);
    return OPJ_TRUE;
}

void collectError(const char* msg, void* user) {
    auto* text = static_cast<std::string*>(user);
    if (text->size() > 400) return;
    if (!text->empty()) text->append("; ");
    std::string m(msg);
    while (!m.empty() && (m.back() == '\n' || m.back() == '\r')) m.pop_back();
    text->append(m);
}

void ignoreMessage(const char*, void*) {}

struct CodecDeleter {
    void operator()(opj_codec_t* c) const { opj_destroy_codec(c); }
};
struct StreamDeleter {
    void operator()(opj_stream_t* s) const { opj_stream_destroy(s); }
};
struct ImageDeleter {
    void operator()(opj_image_t* i) const { opj_image_destroy(i); }
};

bool isJp2(std::span<const uint8_t> d) {
    static const uint8_t kSignature[12] = {0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50,
                                           0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A};
    return d.size() >= 12 && std::memcmp(d.data(), kSignature, 12) == 0;
}

}  // namespace

Status decodeJ2kFrame(std::span<const uint8_t> codestream, int64_t rows, int64_t columns,
                      std::span<int32_t> out, J2kFrameInfo* info, const std::string& subject) {
    if (codestream.size() < 2)
        return corruptData("the JPEG 2000 frame is empty: the file is damaged", subject);
    if (static_cast<int64_t>(out.size()) < rows * columns)
        return internalError("JPEG 2000 output buffer too small", subject);

    std::unique_ptr<opj_codec_t, CodecDeleter> codec(
        opj_create_decompress(isJp2(codestream) ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K));
    if (!codec) return internalError("OpenJPEG could not create a decoder", subject);
    std::string errors;
    opj_set_error_handler(codec.get(), collectError, &errors);
    opj_set_warning_handler(codec.get(), ignoreMessage, nullptr);
    opj_set_info_handler(codec.get(), ignoreMessage, nullptr);
    opj_dparameters_t parameters;
    opj_set_default_decoder_parameters(&parameters);
    if (!opj_setup_decoder(codec.get(), &parameters))
        return internalError("OpenJPEG rejected the decoder parameters: " + errors, subject);

    MemoryStream memory{codestream.data(), codestream.size(), 0};
    std::unique_ptr<opj_stream_t, StreamDeleter> stream(opj_stream_create(64 * 1024, OPJ_TRUE));
    if (!stream) return internalError("OpenJPEG could not create a stream", subject);
    opj_stream_set_user_data(stream.get(), &memory, nullptr);
    opj_stream_set_user_data_length(stream.get(), memory.size);
    opj_stream_set_read_function(stream.get(), readStream);
    opj_stream_set_skip_function(stream.get(), skipStream);
    opj_stream_set_seek_function(stream.get(), seekStream);

    const auto failed = [&](const char* what) {
        return corruptData(fmt::format("JPEG 2000 {} failed ({}): the compressed frame is damaged "
                                       "or truncated; check the file with gdcmconv -w",
                                       what, errors.empty() ? "no detail" : errors),
                           subject);
    };
    opj_image_t* raw_image = nullptr;
    if (!opj_read_header(stream.get(), codec.get(), &raw_image)) {
        opj_image_destroy(raw_image);
        return failed("header decoding");
    }
    std::unique_ptr<opj_image_t, ImageDeleter> image(raw_image);
    // Check the declared size before decoding, so a damaged header cannot make OpenJPEG allocate
    // an arbitrary amount of memory.
    const int64_t width = static_cast<int64_t>(image->x1) - image->x0;
    const int64_t height = static_cast<int64_t>(image->y1) - image->y0;
    if (width != columns || height != rows)
        return corruptData(fmt::format("the JPEG 2000 frame is {}x{} but the DICOM header says "
                                       "{}x{} (columns x rows): the file is inconsistent",
                                       width, height, columns, rows),
                           subject);
    if (image->numcomps != 1)
        return unsupported(fmt::format("the JPEG 2000 frame has {} components; voxseg reads "
                                       "monochrome images only",
                                       image->numcomps),
                           subject);
    if (!opj_decode(codec.get(), stream.get(), image.get()) ||
        !opj_end_decompress(codec.get(), stream.get()))
        return failed("decoding");

    const opj_image_comp_t& comp = image->comps[0];
    if (comp.data == nullptr || comp.w != static_cast<OPJ_UINT32>(columns) ||
        comp.h != static_cast<OPJ_UINT32>(rows) || comp.dx != 1 || comp.dy != 1)
        return unsupported(
            "the JPEG 2000 frame is subsampled or reduced; voxseg reads full "
            "resolution monochrome frames only",
            subject);
    if (comp.prec < 1 || comp.prec > 32)
        return corruptData(fmt::format("JPEG 2000 precision {} bits", comp.prec), subject);
    std::copy_n(comp.data, rows * columns, out.begin());
    if (info) {
        info->precision = static_cast<int>(comp.prec);
        info->is_signed = comp.sgnd != 0;
    }
    return Status::ok();
}

}  // namespace voxseg::io::detail
