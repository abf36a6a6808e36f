// libFuzzer target: an edit journal (edits.jsonl of the viewer's recovery folder, `voxseg edit
// --ops`) as crash recovery and `voxseg edit` read it: readJournal (torn last line and all), then
// every parsed op applied to a LabelEditor on a small grid, as recovery replays it without a model
// (paint strokes, fills, undo/redo, prompt steps, prompt_accept's recorded object decoded and
// checked against the grid).
#include "edit/journal.h"
#include "edit/label_editor.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// The grid of the seeds' recorded objects: 6 x 5 x 4 voxels, 1 mm, origin 0.
voxseg::Geometry grid() {
    voxseg::Geometry g;
    g.size = {6, 5, 4};
    return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace voxseg;
    fuzz::quietLogs();
    const std::string path = fuzz::writeInputFile(data, size, "edits.jsonl");
    auto lines = edit::readJournal(path);
    if (!lines.isOk()) return 0;
    static const Volume image = [] {
        Volume v = Volume::allocate<int16_t>(grid());
        int16_t* p = v.data<int16_t>();
        for (int64_t i = 0; i < grid().voxelCount(); ++i) p[i] = static_cast<int16_t>(i * 7 % 200);
        return v;
    }();
    auto editor = edit::LabelEditor::create(image, Volume::allocate<uint8_t>(grid()));
    if (!editor.isOk()) return 0;
    for (const edit::JournalLine& l : *lines) (void)editor->apply(l.op);
    return 0;
}
