"""The torchvision models of gpucap's real H200 run, for data/sched/models.json.

`gpucap share --platform torch` (docs/measurements/2026-11-26-NVIDIA_H200, section 3) trains
ResNet-18 and serves MobileNetV2 through LibTorch. scripts/sched_model_facts.py rebuilds them in
its op lists in PyTorch's layout (torchvision's resnet.py and mobilenetv2.py: convs without bias,
padding inside the conv, a Dropout before MobileNetV2's classifier) and counts their kernels by
the rule of gpucap's own trainer (src/engine/torch_trainer.cpp) below, not TF's. Imported by
scripts/sched_model_facts.py, which writes the file.
"""

from sched_model_facts import F32, MIB, MOBILENET_V2_BLOCKS, Graph, analyse, bwd_kernels


def resnet18():
    g = Graph("torch_resnet18")
    x = g.input(3, 224, 224)
    x = g.conv(x, 64, 7, 2, "same", bias=False)   # padding 3: 112 x 112, as "same"
    x = g.act(g.bn(x), "relu")
    x = g.pool(x, "max", 3, 2, "same")           # padding 1: 56 x 56
    for f, s in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for b in range(2):
            stride = s if b == 0 else 1
            y = g.act(g.bn(g.conv(x, f, 3, stride, "same", bias=False)), "relu")
            y = g.bn(g.conv(y, f, 3, 1, "same", bias=False))
            short = x
            if stride != 1 or x.shape[0] != f:
                short = g.bn(g.conv(x, f, 1, stride, "same", bias=False))
            x = g.act(g.add([y, short]), "relu")
    x = g.gap(x)
    g.dense(x, 1000, name="fc")
    return g


def mobilenet_v2():
    """Keras's MobileNetV2 layer for layer (the same weights and MACs) without the Pad ops."""
    g = Graph("torch_mobilenet_v2")
    x = g.input(3, 224, 224)
    x = g.act(g.bn(g.conv(x, 32, 3, 2, "same", bias=False)), "relu6")
    for bid, (f, s, e) in enumerate(MOBILENET_V2_BLOCKS):
        inp = x
        cin = x.shape[0]
        if bid:
            x = g.act(g.bn(g.conv(x, e * cin, 1, bias=False)), "relu6")
        x = g.act(g.bn(g.dwconv(x, 3, s, "same")), "relu6")
        x = g.bn(g.conv(x, f, 1, bias=False))
        if cin == f and s == 1:
            x = g.add([inp, x])
    x = g.act(g.bn(g.conv(x, 1280, 1, bias=False)), "relu6")
    x = g.dropout(g.gap(x))
    g.dense(x, 1000, name="classifier")
    return g


BUILDERS = {
    "torch_resnet18": (resnet18, "ResNet-18", 11689512),          # trainable parameters:
    "torch_mobilenet_v2": (mobilenet_v2, "MobileNetV2", 3504872),  # torchvision's table
}

# Kernel-count rule: gpucap's trainer runs a staged TorchScript export with the plain interpreter
# (no fusion), its momentum SGD by hand and its BN buffers saved before each stage.
FWD = {"Conv2D": 1, "DepthwiseConv2dNative": 1, "FusedBatchNorm": 1, "Relu": 1, "Relu6": 1,
       "MaxPool": 1, "Mean": 1, "Add": 1, "MatMul": 1, "BiasAdd": 0,  # the bias inside addmm
       "Dropout": 0}                                                    # none in eval
BN_TRAIN_EXTRA = 1   # num_batches_tracked += 1 (the running statistics update inside the BN kernel)
DROPOUT_TRAIN = 1    # fused native_dropout (mask and scale in one kernel)
LOSS = 2 + 1 + 3     # cross_entropy (log_softmax, nll_loss), backward()'s seed of ones, their gradients
STAGES = 4           # scripts/gpu-measure.sh exports --stages 4: each later stage's input is cloned
OPT_PER_PARAM = 3    # buf.mul_(momentum).add_(grad); p.add_(buf, -lr)
BACKUP_PER_BN = 3    # running_mean, running_var, num_batches_tracked copied before the stage runs


def backward_kernels(op):
    """LibTorch's gradient kernels of one op: TF's rule, except a mean's (expand + one division)
    and a bias's (one sum: the linear's bias gradient)."""
    if op.type == "Mean":
        return 1 if op.inputs[0].rg else 0
    return bwd_kernels(op)


def kernels(g):
    """(inference kernels, training-step kernels) by the rule above."""
    inference = sum(FWD[op.type] for op in g.ops)
    bns = sum(1 for op in g.ops if op.type == "FusedBatchNorm")
    dropouts = sum(1 for op in g.ops if op.type == "Dropout")
    forward = inference + bns * BN_TRAIN_EXTRA + dropouts * DROPOUT_TRAIN + (STAGES - 1)
    backward = sum(backward_kernels(op) for op in g.ops)
    # a tensor read by two ops gets its two gradients summed (the residual adds)
    backward += sum(1 for t in g.tensors if t.rg and len(t.consumers) > 1)
    params = sum(1 for op in g.ops for v in op.vars if v[2])
    return inference, forward + LOSS + backward + params * OPT_PER_PARAM + bns * BACKUP_PER_BN


def entries():
    """models.json's entries of the two models; prints a line of the table for each."""
    out = {}
    for mid, (ctor, name, params_trainable) in BUILDERS.items():
        g = ctor()
        a = analyse(g)
        assert a["params_trainable"] == params_trainable, (mid, a["params_trainable"])
        k_inf, k_train = kernels(g)
        bns = sum(1 for op in g.ops if op.type == "FusedBatchNorm")
        print(f"{mid:28s} {a['params_total']:11d} {a['params_trainable']:11d} "
              f"{a['variables_total'] + bns:5d} {a['variables_trainable']:5d} {'':8s} {'':8s} "
              f"{a['gmacs']:7.3f} {a['sum_out_mib']:7.2f} {a['saved_mib']:7.2f} "
              f"{a['train_peak_mib']:7.2f} {a['infer_peak_mib']:6.2f} {k_inf:5d} {k_train:6d}")
        out[mid] = {
            "name": "torchvision " + name,
            "framework": "LibTorch (gpucap share --platform torch: a staged TorchScript export "
                         "of scripts/export_models.py run by src/engine/torch_trainer.cpp), "
                         "1000 classes",
            "input_size": 224,
            "params_total": a["params_total"],
            "params_trainable": a["params_trainable"],
            "params_non_trainable": a["params_total"] - a["params_trainable"],
            "variables_total": a["variables_total"] + bns,  # + num_batches_tracked per BN
            "variables_trainable": a["variables_trainable"],
            "weights_mib": round(a["params_total"] * F32 / MIB, 3),
            "gmacs_per_image": round(a["gmacs"], 4),
            "train_activation_mib_per_image": a["saved_mib"],
            "train_peak_activation_mib_per_image": a["train_peak_mib"],
            "infer_peak_activation_mib_per_image": a["infer_peak_mib"],
            "gpu_kernels_per_inference": k_inf,
            "gpu_kernels_per_train_step": k_train,
            "mac_layers": a["mac_layers"],
            "sources": [
                "layer structure: pytorch/vision torchvision/models/"
                + ("resnet.py" if "resnet" in mid else "mobilenetv2.py"),
                "params_trainable cross-checked: torchvision's model table "
                "(pytorch.org/vision/stable/models.html)",
                "kernels: the LibTorch rule of scripts/sched_model_facts_torch.py (gpucap's "
                "trainer: 4 stages, momentum SGD in three ops per parameter, BN buffers saved "
                "before each stage); cuDNN may launch more than one kernel per convolution",
            ],
            "exactness": {
                "params": "exact (layer list)",
                "gmacs_per_image": "exact count of conv/linear multiply-accumulates",
                "activations": "derived by the Keras rule of scripts/sched_model_facts.py (not measured)",
                "kernels": "estimate by the stated rule (not profiled)",
            },
        }
    return out
