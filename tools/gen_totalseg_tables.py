#!/usr/bin/env python3
"""Writes tools/data/totalsegmentator-tables.json from an installed TotalSegmentator: the facts
tools/export_totalsegmentator.py needs to rebuild its tasks without importing it.

    pip install totalsegmentator==2.18.0   # in a venv
    python3 tools/gen_totalseg_tables.py -o tools/data/totalsegmentator-tables.json

What it records (TotalSegmentator is Apache-2.0, (c) Jakob Wasserthal et al.; these are its
class names, ids, task settings and the SNOMED CT codes and colours of its DICOM writer):
  - class_map: task -> {id: class name} (map_to_binary.class_map) for the tasks exported;
  - parts: task -> [{task_id, name, classes {id: name}}] in TotalSegmentator's merge order
    (map_taskid_to_partname_*, class_map_5_parts(_total_v3) / class_map_parts_mr /
    class_map_parts_headneck_muscles);
  - tasks: TASK_CONFIGS with DEFAULT_CONFIG applied per (sub-)mode;
  - step_size: nnunet.py uses 0.8 for total, total_v3 and total_mr, else 0.5;
  - codes: resources/totalsegmentator_snomed_mapping.csv (category, type, type modifier,
    colour) per structure.
"""
import argparse
import csv
import importlib.metadata
import json
import os

STEP_08 = ("total", "total_v3", "total_mr")  # nnunet.py nnUNet_predict_image


def code(row, prefix):
    scheme = row.get(f"{prefix}.CodingSchemeDesignator", "")
    if not scheme:
        return None
    return {"code": row[f"{prefix}.CodeValue"], "scheme": scheme,
            "meaning": row[f"{prefix}.CodeMeaning"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    import totalsegmentator
    from totalsegmentator import map_to_binary as mb
    from totalsegmentator.map_tasks_config import DEFAULT_CONFIG, TASK_CONFIGS

    tasks = {}
    for task, raw in TASK_CONFIGS.items():
        modes = raw["sub_modes"] if "sub_modes" in raw else {"default": raw}
        for mode, sub in modes.items():
            conf = dict(DEFAULT_CONFIG)
            conf.update({k: v for k, v in sub.items() if k not in ("info_msg",)})
            for k in ("disallow_fast", "commercial"):
                if k in raw:
                    conf[k] = raw[k]
            name = task if mode == "default" else f"{task}_{mode}"
            conf["class_map"] = task
            conf["step_size"] = 0.8 if task in STEP_08 else 0.5
            tasks[name] = conf
    parts = {}
    for task, cmap, ids in (("total", mb.class_map_5_parts, mb.map_taskid_to_partname_ct),
                            ("total_v3", mb.class_map_5_parts_total_v3,
                             mb.map_taskid_to_partname_ct_v3),
                            ("total_mr", mb.class_map_parts_mr, mb.map_taskid_to_partname_mr),
                            ("headneck_muscles", mb.class_map_parts_headneck_muscles,
                             mb.map_taskid_to_partname_headneck_muscles)):
        # The task's own part list, in its order (the id map also lists test models).
        parts[task] = [{"task_id": tid, "name": ids[tid],
                        "classes": {str(k): v for k, v in cmap[ids[tid]].items()}}
                       for tid in tasks[task]["task_id"]]
    class_map = {t: {str(k): v for k, v in m.items()} for t, m in mb.class_map.items()}
    codes = {}
    csv_path = os.path.join(os.path.dirname(totalsegmentator.__file__), "resources",
                            "totalsegmentator_snomed_mapping.csv")
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            c = {"category": code(row, "SegmentedPropertyCategoryCodeSequence"),
                 "type": code(row, "SegmentedPropertyTypeCodeSequence"),
                 "modifier": code(row, "SegmentedPropertyTypeModifierCodeSequence")}
            rgb = [p.strip() for p in (row.get("DicomRGBColor") or "").split(",")]
            if len(rgb) == 3 and all(p.isdigit() for p in rgb):
                c["color"] = [int(p) for p in rgb]
            codes[row["Structure"]] = {k: v for k, v in c.items() if v is not None}
    out = {"source": f"TotalSegmentator {importlib.metadata.version('TotalSegmentator')} "
                     "(Apache-2.0, Wasserthal et al.): map_to_binary.py, map_tasks_config.py, "
                     "nnunet.py step sizes, resources/totalsegmentator_snomed_mapping.csv",
           "commercial": mb.commercial_models, "tasks": tasks, "parts": parts,
           "class_map": class_map, "codes": codes}
    tmp = a.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, a.output)
    print(f"{a.output}: {len(tasks)} task modes, {len(class_map)} class maps, {len(codes)} codes")


if __name__ == "__main__":
    main()
