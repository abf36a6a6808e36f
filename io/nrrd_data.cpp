#include "io/nrrd_data.h"

#include "io/gzip_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;

// NRRD headers are a few hundred bytes (comments and key:=value pairs included).
constexpr size_t kMaxHeaderBytes = 1 << 20;
// NrrdIO (ITK 5.2) formats a field line it cannot parse into a fixed buffer of about 1 KB: glibc's
// fortify check aborted the process from about 950 characters (fuzz_image_nrrd). Fields (space
// directions of 17-digit numbers included) take a few hundred; comments and key:=value pairs,
// which NrrdIO does not parse, are not limited.
constexpr size_t kMaxFieldLine = 512;
// NrrdIO's ASCII reader scans each value with fscanf("%s") into char[AIR_STRLEN_HUGE = 1025].
constexpr size_t kMaxAsciiToken = 1024;

// Where the data lies and how it is encoded; ITK parses the rest of the header.
struct DataLayout {
    std::string encoding;  // lower case: raw, gzip, ascii, hex...
    bool big_endian = false;
    std::string data_file;  // empty: the data follows the header in the same file
    int64_t line_skip = 0;
    int64_t byte_skip = 0;  // -1: raw data is the file's last bytes
    int64_t data_offset = 0;
};

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r") + 1 - b);
}

// Field names as NrrdIO's airEnumVal matches them: case-insensitive, "data file" = "datafile".
std::string fieldName(const std::string& s) {
    std::string out;
    for (const char c : s)
        if (c != ' ' && c != '\t')
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::optional<int64_t> parseInt(const std::string& t) {
    int64_t v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
    return v;
}

// The next line of `text` from `pos` as NrrdIO's airOneLine reads it: ended by "\n", "\r\n" or a
// lone "\r", cut at a NUL (NrrdIO parses C strings), `length` the line's length before the cut
// (NrrdIO copies that many bytes in places: a NUL does not shorten a line for the length
// limit); false at the end, where a last line without its end counts for nothing (airOneLine
// returns 0 there). `pos` moves past the end.
bool nextLine(const std::string& text, size_t& pos, std::string& line, size_t& length) {
    const size_t end = text.find_first_of("\r\n", pos);
    if (end == std::string::npos) return false;
    length = end - pos;
    line = text.substr(pos, std::min(length, text.find('\0', pos) - pos));
    pos = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
    return true;
}

Result<DataLayout> readLayout(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return ioError("cannot open", path);
    std::string text(kMaxHeaderBytes, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.rfind("NRRD000", 0) != 0)
        return unsupported("not a NRRD file (no NRRD000x magic)", path);
    DataLayout layout;
    bool blank = false;
    size_t pos = 0;
    std::string l;
    size_t length = 0;
    nextLine(text, pos, l, length);  // the magic
    for (int line = 2; nextLine(text, pos, l, length); ++line) {
        if (l.empty()) {  // the blank line that ends an attached header
            blank = true;
            layout.data_offset = static_cast<int64_t>(pos);
            break;
        }
        const size_t colon = l.find(':');
        if (l[0] == '#' || (colon != std::string::npos && l.compare(colon, 2, ":=") == 0))
            continue;  // comments and key:=value pairs, which NrrdIO keeps as they are
        if (length > kMaxFieldLine)
            return corruptData(fmt::format("NRRD header line {} is {} characters long (at most {} "
                                           "for a field; ITK's NrrdIO overflows a buffer on "
                                           "longer ones)",
                                           line, length, kMaxFieldLine),
                               path);
        if (colon == std::string::npos) continue;
        const std::string name = fieldName(l.substr(0, colon));
        const std::string value = trim(l.substr(colon + 1));
        if (name == "encoding") {
            layout.encoding = fieldName(value);
        } else if (name == "endian") {
            layout.big_endian = fieldName(value) == "big";
        } else if (name == "datafile") {
            layout.data_file = value;
            // "LIST" (file names follow, one per line, to the end) or "name%03d.raw min max step":
            // refused as for MetaImage (NrrdIO would open each listed file, and leak when one
            // fails).
            if (value.rfind("LIST", 0) == 0 || value.find('%') != std::string::npos)
                return unsupported("NRRD data split over several files (data file: " + value +
                                       ") is not read: merge it into one .nrrd",
                                   path);
        } else if (name == "lineskip" || name == "byteskip") {
            const auto v = parseInt(value);
            // At most 2^62: offsets and byte counts are added in int64.
            if (!v || *v < (name == "byteskip" ? -1 : 0) || *v > (int64_t{1} << 62))
                return corruptData(
                    fmt::format("NRRD header line {}: {} '{}' is not a count in {}..2^62", line,
                                name == "byteskip" ? "byte skip" : "line skip", value,
                                name == "byteskip" ? -1 : 0),
                    path);
            (name == "byteskip" ? layout.byte_skip : layout.line_skip) = *v;
        }
    }
    if (layout.encoding.empty()) return corruptData("NRRD header has no encoding field", path);
    if (!blank && layout.data_file.empty()) {
        if (text.size() == kMaxHeaderBytes)
            return corruptData(fmt::format("no blank line ends the NRRD header in its first {} "
                                           "bytes: not a NRRD header",
                                           kMaxHeaderBytes),
                               path);
        return corruptData("file is truncated: the NRRD header ends without its data", path);
    }
    return layout;
}

// NrrdIO's test of one ASCII value: sscanf("%d") (or %u, %lld...) for integer types,
// airSingleSscanf ("%f" or nan/inf) for float and double; either takes a number at the token's
// start and ignores what follows ("12abc" is 12, "1,2" is 1).
bool startsWithNumber(const std::string& token, bool floating) {
    if (floating) {
        char* end = nullptr;
        std::strtod(token.c_str(), &end);
        return end != token.c_str();
    }
    const size_t digit = token[0] == '+' || token[0] == '-' ? 1 : 0;
    return digit < token.size() && std::isdigit(static_cast<unsigned char>(token[digit]));
}

// ASCII values: whitespace-separated tokens of at most kMaxAsciiToken characters, each one
// NrrdIO reads as a number.
Status checkAsciiValues(std::ifstream& in, int64_t values, bool floating,
                        const std::string& where) {
    std::vector<char> buf(1 << 16);
    std::string token;
    int64_t count = 0;
    auto finish = [&]() -> Status {
        if (token.empty()) return Status::ok();
        if (!startsWithNumber(token, floating))
            return corruptData(fmt::format("NRRD ASCII value {} ('{}') is not a number", count + 1,
                                           token.substr(0, 32)),
                               where);
        ++count;
        token.clear();
        return Status::ok();
    };
    while (count < values && in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto got = static_cast<size_t>(in.gcount());
        for (size_t i = 0; i < got && count < values; ++i) {
            if (std::isspace(static_cast<unsigned char>(buf[i]))) {
                VOXSEG_RETURN_IF_ERROR(finish());
            } else if (token.size() == kMaxAsciiToken) {
                return corruptData(fmt::format("NRRD ASCII value {} is longer than {} characters "
                                               "(ITK's NrrdIO would overflow its buffer)",
                                               count + 1, kMaxAsciiToken),
                                   where);
            } else {
                token += buf[i];
            }
        }
    }
    if (count < values) VOXSEG_RETURN_IF_ERROR(finish());
    if (count < values)
        return corruptData(fmt::format("file is truncated: the NRRD header claims {} values, the "
                                       "ASCII data holds {}; re-export or re-copy it",
                                       values, count),
                           where);
    return Status::ok();
}

// Hex data: two hex digits per byte, whitespace anywhere.
Status checkHexDigits(std::ifstream& in, int64_t bytes, const std::string& where) {
    std::vector<char> buf(1 << 16);
    int64_t digits = 0;
    while (digits < 2 * bytes && in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto got = static_cast<size_t>(in.gcount());
        for (size_t i = 0; i < got && digits < 2 * bytes; ++i) {
            const auto c = static_cast<unsigned char>(buf[i]);
            if (std::isxdigit(c)) {
                ++digits;
            } else if (!std::isspace(c)) {
                return corruptData(fmt::format("NRRD hex data has a character 0x{:02x} that is "
                                               "not a hex digit (after {} digits)",
                                               c, digits),
                                   where);
            }
        }
    }
    if (digits < 2 * bytes)
        return corruptData(
            fmt::format("file is truncated: the NRRD header claims {} bytes, the hex "
                        "data holds {}; re-export or re-copy it",
                        bytes, digits / 2),
            where);
    return Status::ok();
}

// Raw and gzip data are read in pieces of this size, with progress between them.
constexpr int64_t kChunkBytes = int64_t{16} << 20;

Status truncated(int64_t need, int64_t have, const char* what, const std::string& where) {
    return corruptData(fmt::format("file is truncated: the NRRD header claims {} bytes of data, "
                                   "the {} holds {}; re-export or re-copy it",
                                   need, what, have),
                       where);
}

// Where the data starts: the data file (the header itself when attached) and the offset after
// the header and the line skip. NrrdIO opens the data file and skips its lines while it reads
// the header, so this runs before ITK does.
struct DataStart {
    DataLayout layout;
    std::string file;
    int64_t offset = 0;
    int64_t file_size = 0;
};

Result<DataStart> locateData(const std::string& path) {
    DataStart d;
    VOXSEG_ASSIGN_OR_RETURN(d.layout, readLayout(path));
    d.file = path;
    if (!d.layout.data_file.empty()) {
        const fs::path rel(d.layout.data_file);
        bool escapes = rel.is_absolute();
        for (const auto& part : rel) escapes = escapes || part == "..";
        if (escapes)
            return corruptData("NRRD data file '" + d.layout.data_file +
                                   "' lies outside the header's folder (absolute or '..')",
                               path);
        d.file = (fs::path(path).parent_path() / rel).string();
        std::error_code ec;
        if (!fs::is_regular_file(d.file, ec))
            return notFound("NRRD data file '" + d.layout.data_file +
                                "' (data file) not found or not a regular file",
                            path);
    }
    std::ifstream in(d.file, std::ios::binary);
    if (!in) return ioError("cannot open the NRRD data", d.file);
    in.seekg(d.layout.data_offset);
    // Lines as airOneLine ends them ("\n", "\r\n", "\r"); each skipped line must end.
    bool ended = true;
    for (int64_t i = 0; i < d.layout.line_skip && ended; ++i) {
        int c = 0;
        while ((c = in.get()) != EOF && c != '\n' && c != '\r') {
        }
        if (c == '\r' && in.peek() == '\n') in.get();
        ended = c != EOF;
    }
    if (!ended)
        return corruptData(fmt::format("file is truncated: it ends inside the NRRD data's line "
                                       "skip ({} lines)",
                                       d.layout.line_skip),
                           d.file);
    d.offset = static_cast<int64_t>(in.tellg());
    std::error_code ec;
    d.file_size = static_cast<int64_t>(fs::file_size(d.file, ec));
    if (ec) return ioError("cannot read the size of the NRRD data: " + ec.message(), d.file);
    return d;
}

// Where raw data of `bytes` bytes starts (the file's last bytes for byte skip -1); kCorruptData
// when the file cannot hold them.
Result<int64_t> rawStart(const DataStart& d, int64_t bytes) {
    const int64_t start =
        d.layout.byte_skip == -1 ? d.file_size - bytes : d.offset + d.layout.byte_skip;
    const int64_t have = d.file_size - std::max(start, d.offset);
    if (start < d.offset || have < bytes)
        return truncated(bytes, std::max<int64_t>(0, have), "file", d.file);
    return start;
}

// Raw data: `bytes` bytes from the data's start.
Status readRaw(const DataStart& d, char* dst, int64_t bytes, const Progress& progress) {
    VOXSEG_ASSIGN_OR_RETURN(const int64_t start, rawStart(d, bytes));
    std::ifstream in(d.file, std::ios::binary);
    in.seekg(start);
    for (int64_t done = 0; done < bytes;) {
        const int64_t n = std::min(bytes - done, kChunkBytes);
        in.read(dst + done, static_cast<std::streamsize>(n));
        if (in.gcount() != n) return ioError("cannot read the NRRD data", d.file);
        done += n;
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        progress.report(static_cast<double>(done) / static_cast<double>(bytes), "reading image");
    }
    return Status::ok();
}

// Gzip data, inflated straight into `dst`: by libdeflate when the stream holds exactly what the
// header claims, else by zlib after the byte skip (which NrrdIO applies to the inflated data),
// asking for one byte more, so that the stream is read to its end and its CRC checked.
Status readGzip(const DataStart& d, char* dst, int64_t bytes, const Progress& progress) {
    std::ifstream in(d.file, std::ios::binary);
    in.seekg(d.offset);
    unsigned char magic[2] = {0, 0};
    in.read(reinterpret_cast<char*>(magic), 2);
    if (in.gcount() < 2 || magic[0] != 0x1f || magic[1] != 0x8b)
        return corruptData("NRRD data is not a gzip stream (encoding: gzip)", d.file);
    if (d.layout.byte_skip == 0 && inflateGzipExactly(d.file, d.offset, dst, bytes)) {
        progress.report(1.0, "reading image");
        return Status::ok();
    }
    VOXSEG_ASSIGN_OR_RETURN(GzipReader gz, GzipReader::open(d.file, d.offset));
    std::vector<char> skip(static_cast<size_t>(std::min<int64_t>(d.layout.byte_skip, 1 << 20)));
    for (int64_t left = d.layout.byte_skip; left > 0;) {
        VOXSEG_ASSIGN_OR_RETURN(const int64_t n,
                                gz.read(skip.data(), std::min<int64_t>(left, skip.size())));
        if (n == 0)
            return truncated(d.layout.byte_skip + bytes, d.layout.byte_skip - left, "gzip stream",
                             d.file);
        left -= n;
    }
    for (int64_t done = 0; done < bytes;) {
        VOXSEG_ASSIGN_OR_RETURN(const int64_t n,
                                gz.read(dst + done, std::min(bytes - done, kChunkBytes)));
        if (n == 0)
            return truncated(d.layout.byte_skip + bytes, d.layout.byte_skip + done, "gzip stream",
                             d.file);
        done += n;
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        progress.report(static_cast<double>(done) / static_cast<double>(bytes), "reading image");
    }
    char one = 0;
    return gz.read(&one, 1).status();
}

void swapBytes(char* data, int64_t bytes, int element_size) {
    for (int64_t i = 0; i + element_size <= bytes; i += element_size)
        std::reverse(data + i, data + i + element_size);
}

Status bzip2Unsupported(const std::string& file) {
    return unsupported(
        "NRRD bzip2 data is not read (ITK's NrrdIO is built without bzip2); re-save it with "
        "gzip or raw encoding",
        file);
}

}  // namespace

Status checkNrrdLayout(const std::string& path) { return locateData(path).status(); }

Result<bool> checkNrrdDataClaim(const std::string& path, int64_t bytes, int64_t values,
                                bool floating) {
    VOXSEG_ASSIGN_OR_RETURN(const DataStart d, locateData(path));
    const std::string& e = d.layout.encoding;
    const int64_t after = std::max<int64_t>(0, d.file_size - d.offset);
    if (e == "raw") {
        VOXSEG_RETURN_IF_ERROR(rawStart(d, bytes).status());
        return false;
    }
    if (e == "gz" || e == "gzip") {
        VOXSEG_RETURN_IF_ERROR(
            checkDeflateCanHold(d.file, "the NRRD's gzip data", d.layout.byte_skip + bytes, after));
        return true;
    }
    if (e == "bz2" || e == "bzip2") return bzip2Unsupported(d.file);
    // ASCII and hex data: the values are counted (a pass over the file, through a 64 KiB buffer),
    // as readNrrdData does before NrrdIO reads them.
    std::ifstream in(d.file, std::ios::binary);
    in.seekg(d.offset + std::max<int64_t>(0, d.layout.byte_skip));
    if (e == "ascii" || e == "text" || e == "txt")
        VOXSEG_RETURN_IF_ERROR(checkAsciiValues(in, values, floating, d.file));
    if (e == "hex") VOXSEG_RETURN_IF_ERROR(checkHexDigits(in, bytes, d.file));
    return false;  // other encodings: readNrrdData names what is wrong
}

Result<bool> readNrrdData(const std::string& path, void* dst, int64_t bytes, int element_size,
                          int64_t values, bool floating, const Progress& progress) {
    VOXSEG_ASSIGN_OR_RETURN(const DataStart d, locateData(path));
    const std::string& e = d.layout.encoding;
    auto* out = static_cast<char*>(dst);
    if (d.layout.byte_skip == -1 && e != "raw")
        return corruptData("NRRD byte skip -1 (data at the file's end) is for raw data only, not " +
                               e.substr(0, 32),
                           d.file);
    if (e == "raw" || e == "gz" || e == "gzip") {
        VOXSEG_RETURN_IF_ERROR(e == "raw" ? readRaw(d, out, bytes, progress)
                                          : readGzip(d, out, bytes, progress));
        if (d.layout.big_endian != (std::endian::native == std::endian::big) && element_size > 1)
            swapBytes(out, bytes, element_size);
        return true;
    }
    if (e != "ascii" && e != "text" && e != "txt" && e != "hex" && e != "bz2" && e != "bzip2")
        return corruptData("NRRD encoding '" + e.substr(0, 32) +
                               "' is not one NRRD defines (raw, gzip, bzip2, ascii, hex)",
                           d.file);
    if (e == "bz2" || e == "bzip2") return bzip2Unsupported(d.file);
    std::ifstream in(d.file, std::ios::binary);
    in.seekg(d.offset + d.layout.byte_skip);
    if (e == "ascii" || e == "text" || e == "txt")
        VOXSEG_RETURN_IF_ERROR(checkAsciiValues(in, values, floating, d.file));
    if (e == "hex") VOXSEG_RETURN_IF_ERROR(checkHexDigits(in, bytes, d.file));
    return false;  // checked; NrrdIO reads it
}

}  // namespace voxseg::io
