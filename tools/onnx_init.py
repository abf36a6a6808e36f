"""Starts a PyTorch model from the weights of an exported model.onnx (continue or fine-tune
training): shared by tools/train_hippocampus.py and tools/train_ct_phantom.py."""
import hashlib
import json
import os

import torch


def init_from_onnx(model, onnx_path):
    """Loads every tensor whose name and shape match (torch.onnx.export keeps parameter names;
    the deep-supervision heads, not exported, start afresh). Returns the record training.json
    keeps: the file, its sha256, tensor counts and the previous training.json if present."""
    import onnx
    from onnx import numpy_helper
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
               for i in onnx.load(onnx_path).graph.initializer}
    sd = model.state_dict()
    loaded = {k: weights[k] for k in sd if k in weights and weights[k].shape == sd[k].shape}
    model.load_state_dict(loaded, strict=False)
    with open(onnx_path, "rb") as f:
        init = {"onnx": onnx_path, "sha256": hashlib.sha256(f.read()).hexdigest(),
                "tensors_loaded": len(loaded), "tensors": len(sd)}
    prev = os.path.join(os.path.dirname(onnx_path), "training.json")
    if os.path.exists(prev):
        with open(prev) as f:
            init["training"] = json.load(f)
    print(f"initialised {len(loaded)}/{len(sd)} tensors from {onnx_path}", flush=True)
    return init
