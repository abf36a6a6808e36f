// Display colours of labels that come without one: a label drawn by hand, a value of a plain label
// map nothing describes, or a label whose codes were just picked. A coded type with a standard
// colour gets it (the colours TotalSegmentator 2.18.0's SNOMED CT mapping gives 163 anatomical
// types, left and right apart: edit/data/standard_colors.inc); any other label gets a colour of a
// perceptually spaced palette, the one farthest from the colours already shown, so the labels of
// a map are told apart (liver and aorta, left and right kidney). Plain functions; thread-safe
// (tables built once).
#pragma once

#include "core/coded_concept.h"
#include "core/label_info.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace voxseg {

using Rgb = std::array<uint8_t, 3>;

// 128 colours chosen greedily (Glasbey's method) for the largest smallest CIELAB difference to
// the ones before, among sRGB colours of middle lightness (L* 50..85) and chroma (30..80),
// visible over a grey CT or MR, starting from a red.
const std::vector<Rgb>& labelPalette();
// The palette colour farthest (largest smallest CIELAB difference; the earliest on a tie) from
// every colour in `used`: the colour of a new label among the shown ones. Labels coloured one
// after another this way take the palette in order while nothing else is used.
Rgb distinctColor(const std::vector<Rgb>& used);

// The standard colour of a coded type (with its modifier, e.g. SNOMED CT 7771000 "Left"), or
// nullopt when the table has none. A modifier the table lacks falls back to the type alone.
std::optional<Rgb> standardColor(const CodedConcept& type,
                                 const std::optional<CodedConcept>& modifier = std::nullopt);

// The colour of a label nothing colours: its type's standard colour, else distinctColor(used).
Rgb defaultLabelColor(const LabelInfo& label, const std::vector<Rgb>& used);

// CIE76 colour difference (Delta E*ab) of two sRGB colours (D65).
double colorDifference(const Rgb& a, const Rgb& b);

}  // namespace voxseg
