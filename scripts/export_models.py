#!/usr/bin/python3
"""Exports torchvision models to TorchScript for gpucap's LibTorch engine (gpucap run
--platform nvml --model-file FILE). Weights are random (seeded): nothing is downloaded, and
throughput and power do not depend on the weights' values.

Uses Debian's python3-torchvision (scripts/setup.sh installs it), hence /usr/bin/python3.

  scripts/export_models.py --out models/                      # the default list
  scripts/export_models.py --out models/ --models resnet50,vgg19
  scripts/export_models.py --out build/models --models mobilenet_v2 --reference

--reference also writes NAME.input.f32 (8 random images, float32, N x 3 x S x S) and
NAME.output.f32 (the model's output for them) with NAME.reference.json (shapes): the C++ tests
check the engine against Python on the same input.
"""

import argparse
import json
import sys
from pathlib import Path

# PctoDL's models (seed-systems.md §2) and the torchvision counterparts of the BatchDVFS list
# (§1: InceptionV1 = GoogLeNet, InceptionV3, ResNet-50/101/152 (v1 here; TF-slim's v2 is not in
# torchvision), MobileNetV2). Inception v4, NASNet and PNASNet have no torchvision model.
DEFAULT_MODELS = [
    "resnet50", "mobilenet_v2", "vgg19", "densenet201", "mnasnet1_0", "efficientnet_v2_m",
    "googlenet", "inception_v3", "resnet101", "resnet152",
]
INPUT_SIZE = {"inception_v3": 299}
REFERENCE_BATCH = 8


def build(name):
    import torchvision
    constructor = getattr(torchvision.models, name, None)
    if constructor is None:
        raise SystemExit(f"export_models: error: torchvision has no model '{name}'")
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    return constructor(**kwargs).eval()


def calibrate_batch_norm(model, size):
    """Random weights leave batch-norm statistics at mean 0 / variance 1, and through dozens of
    layers the activations vanish (outputs ~1e-9): set the running statistics from a few random
    batches, so every layer works on values of order 1, as a trained model's do."""
    import torch
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.rand(8, 3, size, size))
    model.eval()


def export(name, out_dir, seed, reference):
    import torch
    torch.manual_seed(seed)
    model = build(name)
    size = INPUT_SIZE.get(name, 224)
    calibrate_batch_norm(model, size)
    example = torch.rand(1, 3, size, size)
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    path = out_dir / f"{name}.pt"
    traced.save(str(path))
    print(f"export_models: wrote {path} (input 3x{size}x{size})")
    if reference:
        images = torch.rand(REFERENCE_BATCH, 3, size, size, generator=torch.Generator().manual_seed(seed + 1))
        with torch.no_grad():
            output = model(images)
        (out_dir / f"{name}.input.f32").write_bytes(images.contiguous().numpy().astype("<f4").tobytes())
        (out_dir / f"{name}.output.f32").write_bytes(output.contiguous().numpy().astype("<f4").tobytes())
        (out_dir / f"{name}.reference.json").write_text(json.dumps(
            {"model": name, "input_shape": list(images.shape), "output_shape": list(output.shape)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for NAME.pt files (created if missing)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated torchvision names")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random weights and reference input")
    parser.add_argument("--reference", action="store_true", help="also write reference input/output files")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"export_models: error: {e} (install python3-torchvision: scripts/setup.sh)")
    out_dir = Path(args.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"export_models: error: {args.out}: {e.strerror}")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    if not names:
        raise SystemExit("export_models: error: --models is empty")
    for name in names:
        export(name, out_dir, args.seed, args.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
