#include "io/dicom_nesting.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdicent.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

// How the walk follows DCMTK 3.6.7's reader (dcitem.cc, dcsequen.cc, dcvr.cc), so that what it
// counts is at least what DCMTK will recurse into:
// - explicit VR: the VR read from the stream decides (dcmPreferVRFromDataDictionary is off);
//   unknown VRs of two upper-case letters take a 4-byte length, other unknown ones 2 bytes.
// - SQ of any length is a sequence; UN (or an unknown VR) of undefined length is a sequence read
//   as implicit VR little endian (CP-246); OB/OW of undefined length is a pixel sequence
//   (fragments, not nesting) or a DCMTK parse error.
// - implicit VR: the data dictionary decides (public tags); a private element of defined length
//   is a sequence when its value starts with an item or sequence delimitation tag (DCMTK knows
//   some private sequences from its private dictionary and the creator), of undefined length
//   always a sequence (unknown VR: CP-246).
// - a sequence delimiter ends a sequence even of defined length; an item delimiter ends an item;
//   anything DCMTK treats as a fatal parse error ends the walk (DCMTK reads no further).
// Known gap: the GE private pixel sequence (7FE1,xx60) in implicit VR is walked as a sequence.

namespace voxseg::io {
namespace {

constexpr uint32_t kUndefined = 0xFFFFFFFF;
constexpr uint64_t kNoEnd = UINT64_MAX;
constexpr size_t kBufferBytes = 64 * 1024;
constexpr size_t kFirstRead = 4 * 1024;
constexpr int kMeasureCap = 100'000;
constexpr uint32_t kPixelData = 0x7FE00010;
constexpr uint32_t kItem = 0xFFFEE000;
constexpr uint32_t kItemDelimiter = 0xFFFEE00D;
constexpr uint32_t kSequenceDelimiter = 0xFFFEE0DD;

enum class Syntax { kImplicitLittle, kExplicitLittle, kExplicitBig };

// Raw bytes in order: a file, memory, or an inflating stream over either.
class Source {
  public:
    virtual ~Source() = default;
    // Up to n bytes into dst; 0 at the end (or on an error, see error()).
    virtual size_t read(uint8_t* dst, size_t n) = 0;
    // Skips n bytes; false when that passes the end.
    virtual bool skip(uint64_t n) = 0;
    // Set when the source failed in a way the caller must report (inflate limit, damage).
    const Status& error() const { return error_; }

  protected:
    Status error_;
};

class FileSource : public Source {
  public:
    FileSource(std::FILE* f, uint64_t size, uint64_t at) : f_(f), size_(size), at_(at) {}
    size_t read(uint8_t* dst, size_t n) override {
        const size_t got = std::fread(dst, 1, n, f_);
        at_ += got;
        return got;
    }
    bool skip(uint64_t n) override {
        if (n > size_ - std::min(at_, size_)) return false;
        at_ += n;
        return fseeko(f_, static_cast<off_t>(at_), SEEK_SET) == 0;
    }

  private:
    std::FILE* f_;
    uint64_t size_;
    uint64_t at_;
};

class MemorySource : public Source {
  public:
    MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    size_t read(uint8_t* dst, size_t n) override {
        n = std::min(n, size_ - at_);
        if (n == 0) return 0;  // empty input: data_ may be null, which memcpy must not get
        std::memcpy(dst, data_ + at_, n);
        at_ += n;
        return n;
    }
    bool skip(uint64_t n) override {
        if (n > size_ - at_) return false;
        at_ += static_cast<size_t>(n);
        return true;
    }

  private:
    const uint8_t* data_;
    size_t size_;
    size_t at_ = 0;
};

// Raw deflate (RFC 1951) over another source, as DICOM's Deflated Explicit VR Little Endian
// stores the data set; stops with an error past `limit` inflated bytes.
class InflateSource : public Source {
  public:
    InflateSource(Source& in, uint64_t limit, std::string name)
        : in_(in), limit_(limit), name_(std::move(name)), input_(kBufferBytes) {
        ok_ = inflateInit2(&z_, -MAX_WBITS) == Z_OK;
        if (!ok_) error_ = internalError("zlib inflateInit2 failed", name_);
    }
    ~InflateSource() override {
        if (ok_) inflateEnd(&z_);
    }
    size_t read(uint8_t* dst, size_t n) override {
        if (!ok_ || done_ || !error_.isOk()) return 0;
        z_.next_out = dst;
        z_.avail_out = static_cast<uInt>(n);
        while (z_.avail_out > 0 && !done_) {
            if (z_.avail_in == 0) {
                const size_t got = in_.read(input_.data(), input_.size());
                if (got == 0) break;  // truncated: DCMTK reports it
                z_.next_in = input_.data();
                z_.avail_in = static_cast<uInt>(got);
            }
            const int rc = inflate(&z_, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                done_ = true;
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                error_ = corruptData(
                    fmt::format("the deflated dataset is damaged ({}) after {} bytes",
                                z_.msg ? z_.msg : "zlib error", inflated_ + (n - z_.avail_out)),
                    name_);
                break;
            }
        }
        const size_t got = n - z_.avail_out;
        inflated_ += got;
        if (inflated_ > limit_) {
            error_ = unsupported(fmt::format("the deflated dataset inflates to more than {} bytes "
                                             "(limit {} bytes per file): a deflate bomb or a "
                                             "damaged file; raise --max-inflated-bytes if this "
                                             "is real",
                                             inflated_, limit_),
                                 name_);
            return 0;
        }
        return got;
    }
    bool skip(uint64_t n) override {
        uint8_t scratch[16 * 1024];
        while (n > 0) {
            const size_t got =
                read(scratch, static_cast<size_t>(std::min<uint64_t>(n, sizeof scratch)));
            if (got == 0) return false;
            n -= got;
        }
        return true;
    }

  private:
    Source& in_;
    uint64_t limit_;
    std::string name_;
    std::vector<uint8_t> input_;
    z_stream z_{};
    bool ok_ = false;
    bool done_ = false;
    uint64_t inflated_ = 0;
};

// A buffered reader over a Source that counts the bytes it has consumed (the walk's offsets).
class Reader {
  public:
    explicit Reader(Source* source) : source_(source), buffer_(kBufferBytes) {}
    // Makes n (<= kBufferBytes) bytes available at peek(); false at the end.
    bool ensure(size_t n) {
        if (end_ - at_ >= n) return true;
        std::memmove(buffer_.data(), buffer_.data() + at_, end_ - at_);
        end_ -= at_;
        at_ = 0;
        while (end_ < n) {
            // Small reads first: most headers are a few KiB and the pixel data after them is
            // skipped, not read; reads grow while the walk goes on through the bytes.
            const size_t want = std::min(buffer_.size() - end_, std::max(chunk_, n - end_));
            const size_t got = source_->read(buffer_.data() + end_, want);
            if (got == 0) return false;
            end_ += got;
            chunk_ = std::min(chunk_ * 2, buffer_.size());
        }
        return true;
    }
    const uint8_t* peek() const { return buffer_.data() + at_; }
    void consume(size_t n) {
        at_ += n;
        offset_ += n;
    }
    bool skip(uint64_t n) {
        const size_t buffered = end_ - at_;
        if (n <= buffered) {
            consume(static_cast<size_t>(n));
            return true;
        }
        at_ = end_ = 0;
        offset_ += n;
        chunk_ = kFirstRead;
        return source_->skip(n - buffered);
    }
    uint64_t offset() const { return offset_; }
    // The unconsumed buffered bytes (for handing over to an inflating source).
    const uint8_t* bufferedData() const { return buffer_.data() + at_; }
    size_t buffered() const { return end_ - at_; }
    Source* source() const { return source_; }

  private:
    Source* source_;
    std::vector<uint8_t> buffer_;
    size_t at_ = 0, end_ = 0;
    size_t chunk_ = kFirstRead;
    uint64_t offset_ = 0;
};

uint16_t u16(const uint8_t* p, bool big) {
    return big ? static_cast<uint16_t>(p[0] << 8 | p[1]) : static_cast<uint16_t>(p[0] | p[1] << 8);
}
uint32_t u32(const uint8_t* p, bool big) {
    return big ? uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]
               : uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// What an element is to the walk.
enum class Kind { kValue, kSequence, kUnknownSequence, kPixelLike };

// What DCMTK does with a VR read in explicit VR (dcvr.cc DcmVR::setVR).
struct ExplicitVr {
    bool long_length;  // reserved 2 bytes + 4-byte length
    bool no_reserved;  // "na": 4-byte length without reserved bytes
    Kind kind;
};

ExplicitVr classifyVr(uint8_t a, uint8_t b) {
    static const char* const kLong[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SV",
                                        "UC", "UR", "UT", "UV", "ox", "px", "lt"};
    static const char* const kShort[] = {"AE", "AS", "AT", "CS", "DA", "DS", "DT", "FL",
                                         "FD", "IS", "LO", "LT", "PN", "SH", "SL", "SS",
                                         "ST", "TM", "UI", "UL", "US", "xs", "up", "pi"};
    const char vr[2] = {static_cast<char>(a), static_cast<char>(b)};
    if (std::memcmp(vr, "SQ", 2) == 0) return {true, false, Kind::kSequence};
    if (std::memcmp(vr, "UN", 2) == 0) return {true, false, Kind::kUnknownSequence};
    if (std::memcmp(vr, "na", 2) == 0) return {false, true, Kind::kValue};
    for (const char* v : kLong)
        if (std::memcmp(vr, v, 2) == 0) {
            const bool pixel = std::memcmp(vr, "OB", 2) == 0 || std::memcmp(vr, "OW", 2) == 0 ||
                               std::memcmp(vr, "ox", 2) == 0 || std::memcmp(vr, "px", 2) == 0;
            return {true, false, pixel ? Kind::kPixelLike : Kind::kValue};
        }
    for (const char* v : kShort)
        if (std::memcmp(vr, v, 2) == 0) return {false, false, Kind::kValue};
    if (a == '?' && b == '?') return {false, false, Kind::kValue};
    if (a >= 'A' && a <= 'Z' && b >= 'A' && b <= 'Z')  // a future VR: extended length, as UN
        return {true, false, Kind::kUnknownSequence};
    return {false, false, Kind::kValue};
}

// The public data dictionary's VR class per tag (for implicit VR), built once from DCMTK's.
class DictionaryKinds {
  public:
    static const DictionaryKinds& get() {
        static const DictionaryKinds kinds;
        return kinds;
    }
    // kUnknownSequence for tags the dictionary does not know (DCMTK reads them as UN).
    Kind kind(uint16_t group, uint16_t element) const {
        const auto it = exact_.find(uint32_t{group} << 16 | element);
        if (it != exact_.end()) return it->second;
        for (const Range& r : ranges_)
            if (group >= r.group_lo && group <= r.group_hi && element >= r.element_lo &&
                element <= r.element_hi)
                return r.kind;
        return Kind::kUnknownSequence;
    }

  private:
    struct Range {
        uint16_t group_lo, group_hi, element_lo, element_hi;
        Kind kind;
    };
    static Kind kindOf(DcmEVR vr) {
        switch (vr) {
            case EVR_SQ:
                return Kind::kSequence;
            case EVR_OB:
            case EVR_OW:
            case EVR_ox:
            case EVR_px:
                return Kind::kPixelLike;
            case EVR_UN:
            case EVR_UNKNOWN:
                return Kind::kUnknownSequence;
            default:
                return Kind::kValue;
        }
    }
    DictionaryKinds() {
        DcmDataDictionary& dict = dcmDataDict.wrlock();
        for (auto it = dict.normalBegin(); it != dict.normalEnd(); ++it) {
            const DcmDictEntry* e = *it;
            if (e->getPrivateCreator() != nullptr) continue;  // private: decided by probing
            exact_[uint32_t{e->getGroup()} << 16 | e->getElement()] = kindOf(e->getEVR());
        }
        for (auto it = dict.repeatingBegin(); it != dict.repeatingEnd(); ++it) {
            const DcmDictEntry* e = *it;
            if (e->getPrivateCreator() != nullptr) continue;
            ranges_.push_back({e->getGroup(), e->getUpperGroup(), e->getElement(),
                               e->getUpperElement(), kindOf(e->getEVR())});
        }
        dcmDataDict.wrunlock();
    }
    std::unordered_map<uint32_t, Kind> exact_;
    std::vector<Range> ranges_;
};

struct Frame {
    enum Type { kDataset, kSequence, kItem, kFragments } type;
    Syntax syntax;
    uint64_t end;  // offset where a defined length ends, kNoEnd when undefined
    bool probed;   // a private element of defined length walked as a sequence on a guess
};

struct WalkResult {
    int depth_reached = 0;
    bool over = false;
};

// The iterative walk over one data set (or the file meta group when `meta` is set: then it
// stops before the first element of another group). Returns false when the walk ended early
// (the end of the data, or a structure DCMTK refuses): the caller treats both alike.
class Walker {
  public:
    Walker(Reader& reader, int limit) : reader_(reader), limit_(limit) {
        stack_.reserve(static_cast<size_t>(std::min(limit, 1024)) * 2 + 2);
    }

    WalkResult result() const { return result_; }

    // Walks a data set in `syntax` until its end; `meta`: stop before a group other than 0002;
    // `stop_at_pixel_data`: stop before a top-level (7FE0,0010).
    void walk(Syntax syntax, bool meta, bool stop_at_pixel_data) {
        stack_.clear();
        depth_ = 0;
        stack_.push_back({Frame::kDataset, syntax, kNoEnd, false});
        while (!stack_.empty() && !capped_) {
            Frame& f = stack_.back();
            if (f.end != kNoEnd && reader_.offset() >= f.end) {
                pop();
                continue;
            }
            bool go_on = false;
            switch (f.type) {
                case Frame::kDataset:
                case Frame::kItem:
                    go_on = element(meta && stack_.size() == 1,
                                    stop_at_pixel_data && stack_.size() == 1);
                    break;
                case Frame::kSequence:
                    go_on = item();
                    break;
                case Frame::kFragments:
                    go_on = fragment();
                    break;
            }
            if (!go_on && !unwindProbe()) return;
        }
    }

  private:
    void pop() {
        if (stack_.back().type == Frame::kSequence) --depth_;
        stack_.pop_back();
    }

    void open(Frame::Type type, Syntax syntax, uint32_t length, bool probed = false) {
        const uint64_t end = length == kUndefined ? kNoEnd : reader_.offset() + length;
        if (type == Frame::kSequence && ++depth_ > limit_) result_.over = true;
        result_.depth_reached = std::max(result_.depth_reached, depth_);
        // Past the limit the walk goes on only to tell how deep the file nests, up to a cap
        // that keeps the frame stack small (24 bytes a level).
        if (depth_ > std::max(limit_, kMeasureCap)) capped_ = true;
        stack_.push_back({type, syntax, end, probed});
    }

    // A walk that went wrong inside a private value opened on a guess: the guess was wrong
    // (DCMTK reads it as bytes): skip to that value's end and go on.
    bool unwindProbe() {
        size_t i = stack_.size();
        while (i > 0 && !stack_[i - 1].probed) --i;
        if (i == 0) return false;
        const uint64_t end = stack_[i - 1].end;
        if (reader_.offset() > end) return false;
        while (stack_.size() >= i) pop();
        return reader_.skip(end - reader_.offset());
    }

    bool element(bool meta, bool stop_at_pixel_data) {
        const Syntax syntax = stack_.back().syntax;
        const bool big = syntax == Syntax::kExplicitBig;
        if (!reader_.ensure(8)) return false;
        const uint8_t* h = reader_.peek();
        const uint16_t group = u16(h, big), elem = u16(h + 2, big);
        const uint32_t tag = uint32_t{group} << 16 | elem;
        if (meta && group != 0x0002) return false;
        if (stop_at_pixel_data && tag >= kPixelData) return false;
        if (group == 0xFFFE && (elem == 0xE000 || elem == 0xE00D || elem == 0xE0DD)) {
            // No VR in any syntax. An item delimiter ends an item (DCMTK also accepts it in a
            // data set, ending the read); an item or sequence delimiter here is a parse error.
            reader_.consume(8);
            if (tag == kItemDelimiter && stack_.back().type == Frame::kItem) {
                pop();
                return true;
            }
            return false;
        }
        uint32_t length = 0;
        Kind kind = Kind::kValue;
        if (syntax == Syntax::kImplicitLittle) {
            length = u32(h + 4, false);
            reader_.consume(8);
            if (group & 1) {
                kind = Kind::kUnknownSequence;
                if (length != kUndefined && startsLikeSequence(length)) {
                    open(Frame::kSequence, Syntax::kImplicitLittle, length, /*probed=*/true);
                    return true;
                }
            } else {
                kind = DictionaryKinds::get().kind(group, elem);
                if (tag == kPixelData || (group >= 0x6000 && group <= 0x60FF && elem == 0x3000))
                    kind = Kind::kPixelLike;
            }
        } else {
            const ExplicitVr vr = classifyVr(h[4], h[5]);
            kind = vr.kind;
            if (vr.long_length || vr.no_reserved) {
                const size_t header = vr.no_reserved ? 8 : 12;
                if (!reader_.ensure(header)) return false;
                length = u32(reader_.peek() + header - 4, big);
                reader_.consume(header);
            } else {
                length = u16(h + 6, big);
                reader_.consume(8);
            }
        }
        switch (kind) {
            case Kind::kSequence:
                open(Frame::kSequence, syntax, length);
                return true;
            case Kind::kUnknownSequence:
                if (length != kUndefined) break;
                open(Frame::kSequence, Syntax::kImplicitLittle, length);
                return true;
            case Kind::kPixelLike:
                if (length != kUndefined) break;
                open(Frame::kFragments, syntax, length);
                return true;
            case Kind::kValue:
                break;
        }
        return reader_.skip(length);  // an undefined length here passes the end: DCMTK fails
    }

    // Implicit VR, private, defined length: DCMTK reads it as a sequence when its private
    // dictionary says SQ for the element's creator; a sequence starts with an item or a
    // sequence delimiter, so such a value is walked as one (and skipped if the guess fails).
    bool startsLikeSequence(uint32_t length) {
        if (length < 8 || !reader_.ensure(8)) return false;
        const uint8_t* p = reader_.peek();
        const uint32_t tag = uint32_t{u16(p, false)} << 16 | u16(p + 2, false);
        return tag == kItem || tag == kSequenceDelimiter;
    }

    // The tag and length of the item or delimiter at the read position, consumed.
    bool itemHeader(uint32_t& tag, uint32_t& length) {
        const bool big = stack_.back().syntax == Syntax::kExplicitBig;
        if (!reader_.ensure(8)) return false;
        const uint8_t* h = reader_.peek();
        tag = uint32_t{u16(h, big)} << 16 | u16(h + 2, big);
        length = u32(h + 4, big);
        reader_.consume(8);
        return true;
    }

    bool item() {
        const Syntax syntax = stack_.back().syntax;
        uint32_t tag = 0;
        uint32_t length = 0;
        if (!itemHeader(tag, length)) return false;
        if (tag == kSequenceDelimiter) {
            pop();
            return true;
        }
        if (tag != kItem) return false;  // DCMTK: parse error in sequence
        open(Frame::kItem, syntax, length);
        return true;
    }

    bool fragment() {
        uint32_t tag = 0;
        uint32_t length = 0;
        if (!itemHeader(tag, length)) return false;
        if (tag == kSequenceDelimiter) {
            pop();
            return true;
        }
        if (tag != kItem || length == kUndefined) return false;
        return reader_.skip(length);
    }

    Reader& reader_;
    int limit_;
    int depth_ = 0;
    bool capped_ = false;
    std::vector<Frame> stack_;
    WalkResult result_;
};

// DCMTK's guess for a data set without meta (DcmItem::checkTransferSyntax, simplified): explicit
// when bytes 4-5 are an upper-case VR, big endian when the group reads smaller that way.
Syntax guessSyntax(const uint8_t* h) {
    const bool big = u16(h, true) < u16(h, false);
    const bool upper = h[4] >= 'A' && h[4] <= 'Z' && h[5] >= 'A' && h[5] <= 'Z';
    if (!upper) return Syntax::kImplicitLittle;
    return big ? Syntax::kExplicitBig : Syntax::kExplicitLittle;
}

std::string trimUid(const uint8_t* p, size_t n) {
    std::string v(reinterpret_cast<const char*>(p), n);
    while (!v.empty() && (v.back() == '\0' || v.back() == ' ')) v.pop_back();
    return v;
}

Status refusal(const WalkResult& r, int limit, const std::string& name) {
    const std::string depth = r.depth_reached > kMeasureCap
                                  ? fmt::format("more than {}", kMeasureCap)
                                  : std::to_string(r.depth_reached);
    return unsupported(fmt::format("sequences nested {} levels deep (limit {}): refused before "
                                   "parsing, as a hostile or damaged file; raise "
                                   "--max-nesting-depth if this is real",
                                   depth, limit),
                       name);
}

// Walks what `reader` holds: [preamble + DICM] + meta + data set, or a bare data set; `known`
// is the data set's syntax when the caller knows it (network), else empty.
Status walkObject(Reader& reader, const std::string& known_syntax, bool has_meta_option,
                  const std::string& name, const NestingCheckOptions& options) {
    Walker walker(reader, std::max(options.limit, 0));
    std::string syntax_uid = known_syntax;
    if (has_meta_option) {
        if (reader.ensure(132) && std::memcmp(reader.peek() + 128, "DICM", 4) == 0)
            reader.consume(132);
        // The meta group (explicit VR little endian; DCMTK also accepts it implicit).
        if (reader.ensure(8) && u16(reader.peek(), false) == 0x0002) {
            const uint8_t* h = reader.peek();
            const bool upper = h[4] >= 'A' && h[4] <= 'Z' && h[5] >= 'A' && h[5] <= 'Z';
            const Syntax meta_syntax = upper ? Syntax::kExplicitLittle : Syntax::kImplicitLittle;
            // Find the transfer syntax as the meta group is walked: walk element by element.
            // The meta group is small; read its elements here (the Walker skips values).
            while (reader.ensure(8) && u16(reader.peek(), false) == 0x0002) {
                h = reader.peek();
                const uint16_t elem = u16(h + 2, false);
                uint32_t length = 0;
                size_t header = 8;
                Kind kind = Kind::kValue;
                if (meta_syntax == Syntax::kImplicitLittle) {
                    length = u32(h + 4, false);
                } else {
                    const ExplicitVr vr = classifyVr(h[4], h[5]);
                    kind = vr.kind;
                    if (vr.long_length || vr.no_reserved) {
                        header = vr.no_reserved ? 8 : 12;
                        if (!reader.ensure(header)) return Status::ok();
                        length = u32(reader.peek() + header - 4, false);
                    } else {
                        length = u16(h + 6, false);
                    }
                }
                if (kind == Kind::kSequence || (length == kUndefined && kind != Kind::kValue)) {
                    // A sequence in the meta group: nothing legitimate; walk the rest of the
                    // group with the walker so that its nesting counts.
                    walker.walk(meta_syntax, /*meta=*/true, false);
                    if (walker.result().over) return refusal(walker.result(), options.limit, name);
                    break;
                }
                reader.consume(header);
                if (elem == 0x0010 && length < 256) {
                    if (!reader.ensure(length)) return Status::ok();
                    syntax_uid = trimUid(reader.peek(), length);
                    reader.consume(length);
                } else if (!reader.skip(length)) {
                    return Status::ok();
                }
            }
        }
    }
    if (!reader.ensure(8)) return Status::ok();
    Syntax syntax = guessSyntax(reader.peek());
    std::unique_ptr<MemorySource> rest;
    std::unique_ptr<InflateSource> inflate;
    std::vector<uint8_t> rest_bytes;
    if (syntax_uid == "1.2.840.10008.1.2") {
        syntax = Syntax::kImplicitLittle;
    } else if (syntax_uid == "1.2.840.10008.1.2.2") {
        syntax = Syntax::kExplicitBig;
    } else if (syntax_uid == "1.2.840.10008.1.2.1.99") {
        // Deflated: what is buffered goes first, then the rest of the source.
        class Chain : public Source {
          public:
            Chain(std::vector<uint8_t> head, Source* tail) : head_(std::move(head)), tail_(tail) {}
            size_t read(uint8_t* dst, size_t n) override {
                if (at_ < head_.size()) {
                    n = std::min(n, head_.size() - at_);
                    std::memcpy(dst, head_.data() + at_, n);
                    at_ += n;
                    return n;
                }
                return tail_->read(dst, n);
            }
            bool skip(uint64_t) override { return false; }

          private:
            std::vector<uint8_t> head_;
            size_t at_ = 0;
            Source* tail_;
        };
        auto chain = std::make_unique<Chain>(
            std::vector<uint8_t>(reader.bufferedData(), reader.bufferedData() + reader.buffered()),
            reader.source());
        InflateSource inflating(*chain, readLimits().inflated_bytes_per_file, name);
        Reader inflated(&inflating);
        Walker deflated_walker(inflated, std::max(options.limit, 0));
        deflated_walker.walk(Syntax::kExplicitLittle, false, options.stop_at_pixel_data);
        if (deflated_walker.result().over)
            return refusal(deflated_walker.result(), options.limit, name);
        return inflating.error();
    } else if (!syntax_uid.empty() && syntax_uid.rfind("1.2.840.10008.1.2", 0) == 0) {
        syntax = Syntax::kExplicitLittle;
    }
    walker.walk(syntax, false, options.stop_at_pixel_data);
    if (walker.result().over) return refusal(walker.result(), options.limit, name);
    return Status::ok();
}

}  // namespace

Status checkDicomNesting(const std::string& path) { return checkDicomNesting(path, {}); }

Status checkDicomNesting(const std::string& path, const NestingCheckOptions& options) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return ioError(fmt::format("cannot open the file: {}", std::strerror(errno)), path);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> close(f, &std::fclose);
    std::setvbuf(f, nullptr, _IONBF, 0);  // the Reader buffers
    if (fseeko(f, 0, SEEK_END) != 0) return ioError("cannot seek in the file", path);
    const uint64_t size = static_cast<uint64_t>(ftello(f));
    std::rewind(f);
    FileSource source(f, size, 0);
    Reader reader(&source);
    return walkObject(reader, {}, true, path, options);
}

Status checkDicomNestingBytes(const uint8_t* data, size_t size, const std::string& name,
                              const NestingCheckOptions& options) {
    MemorySource source(data, size);
    Reader reader(&source);
    return walkObject(reader, {}, true, name, options);
}

Status checkDicomDatasetNesting(const uint8_t* data, size_t size,
                                const std::string& transfer_syntax_uid, const std::string& name,
                                const NestingCheckOptions& options) {
    MemorySource source(data, size);
    Reader reader(&source);
    return walkObject(
        reader,
        transfer_syntax_uid.empty() ? std::string("1.2.840.10008.1.2.1") : transfer_syntax_uid,
        false, name, options);
}

}  // namespace voxseg::io
