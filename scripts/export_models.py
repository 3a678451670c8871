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

For training jobs (gpucap's LibTorch trainer, include/gpucap/engine/torch_trainer.hpp):

  scripts/export_models.py --out models/ --models resnet18 --train             # NAME.train.pt
  scripts/export_models.py --out models/ --models tiny_cnn --train --stages 3  # 3 stage files

--train scripts the model (torch.jit.script, not trace) in training mode, so that batch norm uses
the batch's statistics and updates its running ones, and the C++ side can switch modes.
--stages N cuts the model into N sequential stages at module boundaries (points where one tensor
alone flows on and no module other than an nn.Sequential is left half-run), each its own
TorchScript file NAME[.train].stageKofN.pt (K = 1..N) that takes one tensor and returns one, and
writes NAME[.train].stages.json (the files in order, the input size, the number of classes).
Besides torchvision's names, "tiny_cnn" is a 3-convolution network (32 x 32 input, 10 classes)
small enough for tests.
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
INPUT_SIZE = {"inception_v3": 299, "tiny_cnn": 32}
REFERENCE_BATCH = 8


def tiny_cnn():
    """Three convolutions with batch norm, pooling and a linear classifier: a model whose training
    step takes milliseconds on a CPU, for tests."""
    from torch import nn
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True)),
        nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)),
        nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True)),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10))


def build(name):
    if name == "tiny_cnn":
        return tiny_cnn().eval()
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
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.rand(8, 3, size, size))
    model.eval()
    # Training goes on with the usual running average (eval mode never reads the momentum).
    for norm, momentum in zip(norms, momenta):
        norm.momentum = momentum


class _ModuleStackTracer:
    """torch.fx tracing that records, on every node, the modules being run when it was made
    (outermost first): stage cuts must not fall inside a module other than an nn.Sequential."""

    @staticmethod
    def trace(model):
        from torch import fx

        class Tracer(fx.Tracer):
            def __init__(self):
                super().__init__()
                self.stack = []

            def call_module(self, module, forward, args, kwargs):
                self.stack.append(self.path_of_module(module))
                try:
                    return super().call_module(module, forward, args, kwargs)
                finally:
                    self.stack.pop()

            def create_node(self, *args, **kwargs):
                node = super().create_node(*args, **kwargs)
                node.meta["module_stack"] = tuple(self.stack)
                return node

        return fx.GraphModule(model, Tracer().trace(model))


def stage_cuts(model, graph_module):
    """Indices i of the nodes after which the graph can be cut in two: the node's output is the only
    value used later, and the innermost module the node and the next one share (if any) is an
    nn.Sequential, so the cut falls between two of its children, not inside a block."""
    from torch import nn
    nodes = list(graph_module.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    last_use = {node: max((position[user] for user in node.users), default=-1) for node in nodes}
    modules = dict(model.named_modules())

    def between_children(a, b):
        shared = None
        for x, y in zip(a.meta["module_stack"], b.meta["module_stack"]):
            if x != y:
                break
            shared = x
        return shared is None or isinstance(modules[shared], nn.Sequential)

    cuts = []
    for i in range(1, len(nodes) - 2):  # not after the input, not before the output
        live = [node for node in nodes[:i + 1] if last_use[node] > i]
        if live == [nodes[i]] and between_children(nodes[i], nodes[i + 1]):
            cuts.append(i)
    return cuts


def split_stages(name, model, count):
    """The model as `count` sequential torch.fx modules, cut at module boundaries spread evenly
    over the ones there are."""
    from torch.fx.passes.split_module import split_module
    graph_module = _ModuleStackTracer.trace(model)
    cuts = stage_cuts(model, graph_module)
    if count - 1 > len(cuts):
        raise SystemExit(f"export_models: error: {name} has {len(cuts)} module boundaries where it can be cut: "
                         f"at most {len(cuts) + 1} stages")
    # Every (len(cuts) + 1) / count-th boundary: distinct and increasing, as that step is >= 1.
    chosen = [cuts[(k * (len(cuts) + 1)) // count - 1] for k in range(1, count)]
    position = {node: i for i, node in enumerate(graph_module.graph.nodes)}
    split = split_module(graph_module, model, lambda node: sum(1 for cut in chosen if position[node] > cut))
    stages = [getattr(split, f"submod_{k}") for k in range(count)]
    owners = {}
    for k, stage in enumerate(stages):
        for parameter in stage.parameters():
            if owners.setdefault(id(parameter), k) != k:
                raise SystemExit(f"export_models: error: {name}: a parameter is used by stages {owners[id(parameter)] + 1} "
                                 f"and {k + 1}; it cannot be cut into {count} stages")
    return stages


def script(name, module, train):
    """TorchScript by scripting, not tracing: a traced batch norm keeps the mode it was traced in,
    a scripted one follows module.train()/eval()."""
    import warnings
    import torch
    module.train(train)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # fx's generated modules annotate in __init__
            return torch.jit.script(module)
    except Exception as e:  # TorchScript raises several unrelated types
        raise SystemExit(f"export_models: error: {name} cannot be scripted: {e}")


def export_scripted(name, out_dir, seed, train, stages):
    """--train and/or --stages: NAME[.train].pt, or NAME[.train].stageKofN.pt and NAME[.train].stages.json."""
    import torch
    torch.manual_seed(seed)
    model = build(name)
    size = INPUT_SIZE.get(name, 224)
    calibrate_batch_norm(model, size)
    with torch.no_grad():
        classes = int(model(torch.rand(1, 3, size, size)).shape[1])
    base = f"{name}.train" if train else name
    if stages is None:
        path = out_dir / f"{base}.pt"
        script(name, model, train).save(str(path))
        print(f"export_models: wrote {path} ({'train' if train else 'eval'} mode, input 3x{size}x{size})")
        return
    files = []
    for k, stage in enumerate(split_stages(name, model, stages), start=1):
        path = out_dir / f"{base}.stage{k}of{stages}.pt"
        script(name, stage, train).save(str(path))
        files.append(path.name)
    manifest = out_dir / f"{base}.stages.json"
    manifest.write_text(json.dumps({"model": name, "mode": "train" if train else "eval", "input_size": size,
                                    "classes": classes, "stages": files}, indent=1) + "\n")
    print(f"export_models: wrote {', '.join(files)} and {manifest.name} in {out_dir} "
          f"({'train' if train else 'eval'} mode, input 3x{size}x{size})")


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
    parser.add_argument("--train", action="store_true",
                        help="script the model in training mode (NAME.train.pt) for gpucap's trainer")
    parser.add_argument("--stages", type=int, metavar="N",
                        help="cut the model into N sequential stages at module boundaries, one file each")
    args = parser.parse_args()
    if args.stages is not None and args.stages < 1:
        raise SystemExit("export_models: error: --stages must be at least 1")
    scripted = args.train or args.stages is not None
    if scripted and args.reference:
        raise SystemExit("export_models: error: --reference is for whole inference models, not with --train or --stages")
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
        if scripted:
            export_scripted(name, out_dir, args.seed, args.train, args.stages)
        else:
            export(name, out_dir, args.seed, args.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
