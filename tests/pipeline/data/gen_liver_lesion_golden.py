#!/usr/bin/env python3
"""pyliverlesionseg 0.3's own lesion pipeline on a CT, for LiverModel.LesionStage* (golden).

Runs the lesion part of `cnn_liver_lesion_seg_CT_MR_main` (pyliverlesionseg 0.3, CT branch, a
NIfTI input with a given liver mask, i.e. its `liver_seg_dir` path) with the original functions
where they are importable and literal transcriptions where the module cannot be imported (it
needs Keras, TensorFlow and Python 3.6):
  - pymirc 0.30.2's `zoom3d` itself (the wheel's zoom3d.py, numba replaced by plain Python),
  - the normalisation, the 18-neighbourhood dilation (iterate_structure(., 2)), the -0.5 fill,
    the clip and the crop to the dilated mask's box, as in the main function,
  - DeepVoxNet.predict's tiling (center_sampling=False, one output, batch 1): its formulas copied
    (general.py), ExtractSegment3D2.get_sample (samplecreator.py) copied,
  - the network: tools/export_liverlesionseg.py's LesionUNet on the HDF5 weights (PyTorch,
    float32; checked against the numpy reference of the Keras graph there),
  - cnn_lesion_pred_postprocess (flag_flip=False), copied.
The liver mask is voxseg's liver stage (`voxseg segment --labels Liver`: label 1 of that run's
label map, the mask voxseg's lesion stage reads), so that the comparison isolates the lesion
stage. Writes the lesion mask (NIfTI, the input's grid) and prints a JSON
summary (lesion voxels, tiles, the box).

Usage (numpy, scipy, nibabel, h5py, torch; pymirc's wheel unpacked, no numba needed):
  python tests/pipeline/data/gen_liver_lesion_golden.py --ct example_ct_sm.nii.gz \
      --voxseg-liver LIVER_ONLY_RUN/segmentation.nii.gz --wheel pyliverlesionseg-0.3-py3-none-any.whl \
      --pymirc /tmp/pymirc_src -o lesion_ref.nii.gz \
      --golden tests/pipeline/data/liver_lesion/example_ct_sm.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import types
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

ROOT = Path(__file__).resolve().parents[3]
SEGMENT_SIZE = [92, 84, 42]


def load_zoom3d(pymirc_root: Path):
    """pymirc's zoom3d.py with numba's njit/prange replaced by plain Python."""
    numba = types.ModuleType("numba")
    numba.njit = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
    numba.prange = range
    sys.modules.setdefault("numba", numba)
    path = pymirc_root / "pymirc/image_operations/zoom3d.py"
    spec = importlib.util.spec_from_file_location("pymirc_zoom3d", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.zoom3d


def extract_segment(image, segment_size, coordinates, default_value=0.0):
    """samplecreator.ExtractSegment3D2.get_sample (subsample 1, no mask, one channel)."""
    I = image[..., None]
    S_size = tuple(segment_size) + (I.shape[-1],)
    S = default_value * np.ones(S_size, dtype=np.float32)
    idx_I = [slice(None)] * I.ndim
    idx_S = [slice(None)] * S.ndim
    for i, (d_I, d_S, c) in enumerate(zip(I.shape[:-1], S_size[:-1], coordinates)):
        s_f = 1
        n_left_I = c
        n_right_I = d_I - c - 1
        n_left_S = d_S // 2
        n_right_S = d_S // 2
        if d_S % 2 == 0:
            n_right_S -= 1
        if n_left_I < n_left_S * s_f:
            n = n_left_I // s_f
            start_S = d_S // 2 - n
            start_I = c - n * s_f
        else:
            start_S = 0
            start_I = c - n_left_S * s_f
        if n_right_I < n_right_S * s_f:
            n = n_right_I // s_f
            end_S = d_S // 2 + n
            end_I = c + n * s_f
        else:
            end_S = d_S - 1
            end_I = c + n_right_S * s_f
        idx_I[i] = slice(start_I, end_I + 1, s_f)
        idx_S[i] = slice(start_S, end_S + 1)
    S[tuple(idx_S)] = I[tuple(idx_I)]
    return S[..., 0]


def deepvoxnet_predict(predict, image, input_size, output_size):
    """DeepVoxNet.predict, center_sampling=False, one output at the input's resolution."""
    I_size = image.shape
    out = np.full(I_size, np.nan)
    seg = [min(n, o) for n, o in zip(I_size, output_size)]
    starts = [range(0, n, s) if not n % s else [*range(0, n, s), n - s]
              for n, s in zip(I_size, seg)]
    tiles = 0
    for x in starts[0]:
        for y in starts[1]:
            for z in starts[2]:
                centre = [math.ceil(v + (s - 1) / 2) for v, s in zip((x, y, z), seg)]
                sl_fill, sl_res = [], []
                for d in range(3):
                    c = centre[d] if input_size[d] % 2 else centre[d] - 0.5
                    start = c - (output_size[d] - 1) / 2
                    end = c + (output_size[d] - 1) / 2
                    under = max(0, -start)
                    over = max(0, end - (I_size[d] - 1))
                    s0 = start + math.ceil(under)
                    e0 = end - math.ceil(over)
                    sl_fill.append(slice(round(s0 - 1e-7), round(e0 + 1 - 1e-7)))
                    sl_res.append(slice(math.ceil(under), -1 * math.ceil(over) or None))
                y_b = predict(extract_segment(image, input_size, centre))
                out[tuple(sl_fill)] = y_b[tuple(sl_res)]
                tiles += 1
    return out, tiles


def lesion_postprocess(cnn_pred, img_vol, bbox, img_resize_orig_shape, Th=0.5):
    """cnn_lesion_pred_postprocess with flag_flip=False."""
    cnn_pred_bi = cnn_pred > Th
    cnn_pred_pad = np.zeros(img_resize_orig_shape)
    cnn_pred_pad[bbox] = cnn_pred_bi
    zoom_factor = np.array(img_vol.shape) / np.array(cnn_pred_pad.shape)
    cnn_pred_resize = ndimage.zoom(cnn_pred_pad, zoom_factor, order=1, prefilter=False)
    return (cnn_pred_resize > 0).astype("int16")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ct", type=Path, required=True)
    ap.add_argument("--voxseg-liver", type=Path, required=True,
                    help="voxseg's label map of the CT run with --labels Liver (liver = 1)")
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--pymirc", type=Path, required=True, help="pymirc 0.30.2 wheel, unpacked")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--golden", type=Path, help="JSON for the test: summary and voxel lists")
    ap.add_argument("--voxseg-rule-out", type=Path,
                    help="also the same probabilities brought back as voxseg brings logits back")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "tools"))
    import export_liverlesionseg as ex
    import torch

    zoom3d = load_zoom3d(args.pymirc)
    weights, header = ex.load_hdf5_weights(ex.read_wheel_member(args.wheel, ex.LESION_HDF5))
    plan = ex.plan_sizes(ex.LESION_CONFIG, SEGMENT_SIZE)
    model = ex.build_lesion_model(weights, plan["align_pool"])
    input_size = plan["input_size"]

    img_nii = nib.as_closest_canonical(nib.load(str(args.ct)))
    img_vol_ras = np.asarray(img_nii.dataobj, dtype=np.float64)
    voxsize_img = np.array(img_nii.header["pixdim"][1:4], dtype=np.float64)
    lab_nii = nib.as_closest_canonical(nib.load(str(args.voxseg_liver)))
    cnn_liv_vol = (np.asarray(lab_nii.dataobj) == 1).astype(np.float64)
    target_voxsize_lesion = np.array(header["voxel_size"], dtype=np.float64)

    # --- cnn_liver_lesion_seg_CT_MR_main, "CNN lesion seg", CT ---
    img_vol_norm = np.clip(img_vol_ras / 1000, -0.2, 0.2) * 2.5
    img_vol_resize = zoom3d(img_vol_norm, voxsize_img / target_voxsize_lesion, cval=0)
    liv_vol_resize = zoom3d(cnn_liv_vol, voxsize_img / target_voxsize_lesion, cval=0)
    liv_vol_resize_bin = (liv_vol_resize > 0.5).astype("int16")
    struct = ndimage.generate_binary_structure(3, 2)
    ss = ndimage.iterate_structure(struct, 2).astype(int)
    liv_vol_dil = ndimage.binary_dilation(liv_vol_resize_bin, structure=ss).astype("int16")
    img_mask_liv = img_vol_resize * liv_vol_dil
    img_mask_liv[np.where(liv_vol_dil == 0)] = -0.5
    img_mask_liv_clip = np.clip(img_mask_liv, -0.5, 0.5)
    wx, wy, wz = np.where(liv_vol_dil > 0)
    bbox_liver = (slice(wx.min(), wx.max() + 1), slice(wy.min(), wy.max() + 1),
                  slice(wz.min(), wz.max() + 1))
    img_mask_liv_crop = img_mask_liv_clip[bbox_liver]

    def predict(segment):
        with torch.no_grad():
            logits = model(torch.from_numpy(segment.astype(np.float32))[None, None])[0, 0]
        return torch.sigmoid(logits).numpy().astype(np.float64)

    pred, tiles = deepvoxnet_predict(predict, img_mask_liv_crop, input_size, SEGMENT_SIZE)
    lesion = lesion_postprocess(pred, img_vol_ras, bbox_liver, img_mask_liv_clip.shape)

    out = nib.Nifti1Image(lesion.astype(np.uint8), img_nii.affine)
    nib.save(out, str(args.out))
    # voxseg's rule for the same 1 x 1 x 3 mm probabilities: logits brought back to the input grid
    # with PyTorch's trilinear (align_corners=False), > 0 (docs/liver-model.md lists the
    # difference): isolates the network input and tiling from the output rule.
    full = np.full(img_mask_liv_clip.shape, 1e-30)
    full[bbox_liver] = np.clip(pred, 1e-30, 1 - 1e-7)
    full_logits = np.log(full / (1 - full))
    back = torch.nn.functional.interpolate(torch.from_numpy(full_logits)[None, None],
                                           size=img_vol_ras.shape, mode="trilinear",
                                           align_corners=False)[0, 0].numpy()
    centre_rule = back > 0
    if args.voxseg_rule_out:
        nib.save(nib.Nifti1Image(centre_rule.astype(np.uint8), img_nii.affine),
                 str(args.voxseg_rule_out))
    inside = lesion.astype(bool) & cnn_liv_vol.astype(bool)
    summary = {
        "ct": args.ct.name, "grid_1x1x3": list(img_mask_liv_clip.shape),
        "box_begin": [int(s.start) for s in bbox_liver],
        "box_size": [int(s.stop - s.start) for s in bbox_liver], "tiles": tiles,
        "lesion_voxels_1x1x3": int((pred > 0.5).sum()),
        "lesion_voxels": int(lesion.sum()), "lesion_voxels_in_liver": int(inside.sum()),
        "liver_voxels": int(cnn_liv_vol.sum()),
        "lesion_voxels_voxseg_rule": int(centre_rule.sum()),
    }
    print(json.dumps(summary))
    if args.golden:
        if not np.allclose(img_nii.affine, nib.load(str(args.ct)).affine):
            raise ValueError("golden voxel lists need a RAS input (indices of the file itself)")
        golden = dict(summary, generator="tests/pipeline/data/gen_liver_lesion_golden.py",
                      voxels_original_rule=np.argwhere(lesion > 0).tolist(),
                      voxels_voxseg_rule=np.argwhere(centre_rule).tolist())
        args.golden.write_text(json.dumps(golden, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
