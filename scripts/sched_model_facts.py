#!/usr/bin/python3
"""Derives data/sched/models.json: per-model facts for the SwitchFlow twin.

The eleven CNNs are rebuilt here as TF1 op lists that follow the layer structure of
keras-applications 1.0.8 (the package that tf.keras 1.13 wraps; SwitchFlow's scripts build
the models through tensorflow.python.keras.applications, weights=None, 1000 classes,
training with optimizer_v2 SGD(lr 0.1, momentum 0.9)). Nothing is imported from Keras or
TensorFlow: each Keras layer is expanded into the TF ops it creates (Conv2D -> Conv2D +
BiasAdd [+ activation], BatchNormalization -> FusedBatchNorm, ...), with shape inference,
so parameter counts can be checked against the Keras Applications table and everything else
(weight tensors, MACs, activation bytes, kernel counts) follows from the same op list.

Two torchvision models (torch_resnet18, torch_mobilenet_v2: the real H200 run of
`gpucap share --platform torch`) are rebuilt in the same op lists in PyTorch's layout; their
kernels follow LibTorch's rule instead of TF's (scripts/sched_model_facts_torch.py).

Usage:
  scripts/sched_model_facts.py                 # writes data/sched/models.json
  scripts/sched_model_facts.py --torch         # also prints a torchvision cross-check
  scripts/sched_model_facts.py --check         # only prints the table, writes nothing

Rules (also in data/sched/README.md):
  * every TF op output is a separate float32 buffer (TF 1.13 on GPU fuses nothing for these
    graphs); Reshape/Flatten alias their input;
  * train_activation = the tensors that gradient ops read, i.e. what must be kept from the
    forward pass (Conv/MatMul/BN inputs, Relu/Relu6/Softmax outputs, MaxPool input+output,
    dropout masks);
  * train_all_outputs = sum of all op outputs of one forward pass (input image included),
    an upper bound (TF frees a buffer once its last reader has run);
  * train_peak = liveness simulation of forward + backward in op order (saved tensors live
    until their gradient op, output gradients live from the first consumer's backward to the
    producer's backward; weight gradients are not counted: each is consumed at once by its
    optimizer op);
  * infer_peak = liveness simulation of the forward pass alone (a tensor dies after its last
    consumer), in the Keras code order;
  * kernels: FWD_KERNELS, BN_TRAIN_EXTRA, ... and bwd_kernels() below.
"""

import argparse
import json
import math
from pathlib import Path

F32 = 4
MIB = 1024.0 * 1024.0

# Keras Applications table (keras.io/applications, 2019-2020 edition): total parameters.
KERAS_TABLE_PARAMS = {
    "keras_vgg16": 138357544, "keras_vgg19": 143667240, "keras_resnet50": 25636712,
    "keras_inception_v3": 23851784, "keras_inception_resnet_v2": 55873736,
    "keras_mobilenet": 4253864, "keras_mobilenet_v2": 3538984,
    "keras_densenet121": 8062504, "keras_densenet169": 14307880,
    "keras_nasnet_mobile": 5326716, "keras_nasnet_large": 88949818,
}

KERAS_FILE = {
    "keras_resnet50": "resnet50.py", "keras_vgg16": "vgg16.py", "keras_vgg19": "vgg19.py",
    "keras_densenet121": "densenet.py", "keras_densenet169": "densenet.py",
    "keras_inception_resnet_v2": "inception_resnet_v2.py",
    "keras_inception_v3": "inception_v3.py", "keras_mobilenet": "mobilenet.py",
    "keras_mobilenet_v2": "mobilenet_v2.py", "keras_nasnet_large": "nasnet.py",
    "keras_nasnet_mobile": "nasnet.py",
}
EXTRA_SOURCES = {
    "keras_nasnet_large": ["MACs agree with keras nasnet.py docstring: 23.8 B mult-adds, 88.9 M params"],
    "keras_nasnet_mobile": ["MACs agree with keras nasnet.py docstring: 564 M mult-adds, 5.3 M params"],
    "keras_resnet50": ["torchvision resnet50 differs: no conv biases (25,557,032 params), "
                       "stride on the 3x3 conv (4.09 GMACs vs Keras 3.86)"],
    "keras_vgg16": ["torchvision vgg16: same params and GMACs"],
    "keras_vgg19": ["torchvision vgg19: same params and GMACs"],
    "keras_densenet121": ["torchvision densenet121: same trainable params and GMACs"],
    "keras_densenet169": ["torchvision densenet169: same trainable params and GMACs"],
    "keras_inception_v3": ["torchvision inception_v3 (no aux): same GMACs; BN has gamma "
                           "(23,834,568 params)"],
    "keras_mobilenet_v2": ["torchvision mobilenet_v2: same trainable params and GMACs"],
}

# SwitchFlow Table 1 (reference §2.5): stateful variables (MiB) moved 2080 Ti -> 1080 Ti.
TABLE1_MIB = {
    "keras_resnet50": 198.53, "keras_vgg16": 1055.58, "keras_vgg19": 1096.09,
    "keras_densenet121": 64.83, "keras_densenet169": 108.61,
    "keras_inception_resnet_v2": 426.18, "keras_inception_v3": 182.00,
    "keras_mobilenet_v2": 27.25,
}


# ----------------------------------------------------------------------------------------
# A TF1 op list with shape inference
# ----------------------------------------------------------------------------------------

class Tensor:
    __slots__ = ("tid", "shape", "elems", "alias_of", "producer", "consumers", "rg")

    def __init__(self, tid, shape, alias_of=None):
        self.tid = tid
        self.shape = tuple(shape)
        self.elems = 1
        for s in shape:
            self.elems *= s
        self.alias_of = alias_of  # Reshape/Flatten: shares its input's buffer
        self.producer = None
        self.consumers = []
        self.rg = False  # depends on a trainable variable (needs a gradient)


class Op:
    __slots__ = ("idx", "type", "inputs", "output", "macs", "vars", "attrs")

    def __init__(self, idx, typ, inputs, output, macs, vars_, attrs):
        self.idx = idx
        self.type = typ
        self.inputs = inputs
        self.output = output
        self.macs = macs
        self.vars = vars_      # list of (name, elems, trainable)
        self.attrs = attrs


def out_len(n, k, s, padding):
    if padding == "same":
        return -(-n // s)
    return (n - k) // s + 1


def correct_pad(n, k):
    """keras_applications.correct_pad for a square input of side n and kernel k."""
    adjust = 1 - n % 2
    c = k // 2
    return (c - adjust, c)


class Graph:
    def __init__(self, name):
        self.name = name
        self.tensors = []
        self.ops = []
        self.n_keras_layers = 0

    # -- plumbing --
    def _tensor(self, shape, alias_of=None):
        t = Tensor(len(self.tensors), shape, alias_of)
        self.tensors.append(t)
        return t

    def _op(self, typ, inputs, shape, macs=0, vars_=(), **attrs):
        out = self._tensor(shape, alias_of=attrs.pop("alias", None))
        op = Op(len(self.ops), typ, list(inputs), out, macs, list(vars_), attrs)
        out.producer = op
        for t in inputs:
            t.consumers.append(op)
        out.rg = any(t.rg for t in inputs) or any(v[2] for v in vars_)
        self.ops.append(op)
        return out

    def input(self, c, h, w):
        t = self._tensor((c, h, w))
        t.rg = False
        return t

    # -- Keras layers, expanded into TF ops --
    def conv(self, x, filters, k, s=1, padding="same", bias=True, act=None, name="conv"):
        kh, kw = (k, k) if isinstance(k, int) else k
        c, h, w = x.shape
        ho, wo = out_len(h, kh, s, padding), out_len(w, kw, s, padding)
        vars_ = [(name + "/kernel", kh * kw * c * filters, True)]
        y = self._op("Conv2D", [x], (filters, ho, wo), macs=ho * wo * filters * kh * kw * c,
                     vars_=vars_, k=(kh, kw), name=name)
        if bias:
            y = self._op("BiasAdd", [y], y.shape, vars_=[(name + "/bias", filters, True)])
        self.n_keras_layers += 1
        if act:
            y = self._act(y, act)
        return y

    def dwconv(self, x, k=3, s=1, padding="same", bias=False, name="dw"):
        c, h, w = x.shape
        ho, wo = out_len(h, k, s, padding), out_len(w, k, s, padding)
        y = self._op("DepthwiseConv2dNative", [x], (c, ho, wo), macs=ho * wo * c * k * k,
                     vars_=[(name + "/depthwise_kernel", k * k * c, True)], k=(k, k), name=name)
        if bias:
            y = self._op("BiasAdd", [y], y.shape, vars_=[(name + "/bias", c, True)])
        self.n_keras_layers += 1
        return y

    def sepconv(self, x, filters, k=3, s=1, padding="same", name="sep"):
        """Keras SeparableConv2D(use_bias=False): depthwise then 1x1 pointwise."""
        c, h, w = x.shape
        ho, wo = out_len(h, k, s, padding), out_len(w, k, s, padding)
        d = self._op("DepthwiseConv2dNative", [x], (c, ho, wo), macs=ho * wo * c * k * k,
                     vars_=[(name + "/depthwise_kernel", k * k * c, True)], k=(k, k), name=name)
        y = self._op("Conv2D", [d], (filters, ho, wo), macs=ho * wo * filters * c,
                     vars_=[(name + "/pointwise_kernel", c * filters, True)], k=(1, 1),
                     name=name + "_pw")
        self.n_keras_layers += 1
        return y

    def bn(self, x, scale=True, center=True, name="bn"):
        c = x.shape[0]
        vars_ = []
        if scale:
            vars_.append((name + "/gamma", c, True))
        if center:
            vars_.append((name + "/beta", c, True))
        vars_ += [(name + "/moving_mean", c, False), (name + "/moving_variance", c, False)]
        self.n_keras_layers += 1
        return self._op("FusedBatchNorm", [x], x.shape, vars_=vars_)

    def _act(self, x, kind):
        typ = {"relu": "Relu", "relu6": "Relu6", "softmax": "Softmax"}[kind]
        return self._op(typ, [x], x.shape)

    def act(self, x, kind):
        self.n_keras_layers += 1
        return self._act(x, kind)

    def pool(self, x, kind, k, s, padding="valid"):
        c, h, w = x.shape
        self.n_keras_layers += 1
        return self._op("MaxPool" if kind == "max" else "AvgPool", [x],
                        (c, out_len(h, k, s, padding), out_len(w, k, s, padding)))

    def gap(self, x):
        self.n_keras_layers += 1
        return self._op("Mean", [x], (x.shape[0],))

    def pad(self, x, tb, lr=None):
        lr = tb if lr is None else lr
        c, h, w = x.shape
        self.n_keras_layers += 1
        return self._op("Pad", [x], (c, h + tb[0] + tb[1], w + lr[0] + lr[1]))

    def crop(self, x, tb, lr):
        c, h, w = x.shape
        self.n_keras_layers += 1
        return self._op("StridedSlice", [x], (c, h - tb[0] - tb[1], w - lr[0] - lr[1]))

    def add(self, xs):
        self.n_keras_layers += 1
        y = xs[0]
        for z in xs[1:]:
            y = self._op("Add", [y, z], xs[0].shape)
        return y

    def concat(self, xs):
        self.n_keras_layers += 1
        c = sum(t.shape[0] for t in xs)
        return self._op("ConcatV2", list(xs), (c,) + tuple(xs[0].shape[1:]))

    def scaled_residual(self, x, up, scale):
        """InceptionResNetV2's Lambda: x + up * scale."""
        self.n_keras_layers += 1
        m = self._op("Mul", [up], up.shape)
        return self._op("Add", [x, m], x.shape)

    def reshape(self, x, shape):
        self.n_keras_layers += 1
        return self._op("Reshape", [x], shape, alias=x.tid)

    def dropout(self, x):
        self.n_keras_layers += 1
        return self._op("Dropout", [x], x.shape)

    def dense(self, x, units, bias=True, act=None, name="dense"):
        n = x.elems
        y = self._op("MatMul", [x], (units,), macs=n * units,
                     vars_=[(name + "/kernel", n * units, True)], name=name)
        if bias:
            y = self._op("BiasAdd", [y], y.shape, vars_=[(name + "/bias", units, True)])
        self.n_keras_layers += 1
        if act:
            y = self._act(y, act)
        return y


# ----------------------------------------------------------------------------------------
# The eleven Keras applications (keras-applications 1.0.8 layer structure)
# ----------------------------------------------------------------------------------------

def vgg(name, blocks):
    g = Graph(name)
    x = g.input(3, 224, 224)
    for nconv, f in zip(blocks, [64, 128, 256, 512, 512]):
        for _ in range(nconv):
            x = g.conv(x, f, 3, act="relu")
        x = g.pool(x, "max", 2, 2)
    x = g.reshape(x, (x.elems,))  # Flatten
    x = g.dense(x, 4096, act="relu", name="fc1")
    x = g.dense(x, 4096, act="relu", name="fc2")
    g.dense(x, 1000, act="softmax", name="predictions")
    return g


def resnet50():
    g = Graph("keras_resnet50")
    x = g.input(3, 224, 224)
    x = g.pad(x, (3, 3))
    x = g.conv(x, 64, 7, 2, "valid")
    x = g.act(g.bn(x), "relu")
    x = g.pad(x, (1, 1))
    x = g.pool(x, "max", 3, 2)

    def block(x, f, s, shortcut_conv):
        f1, f2, f3 = f
        y = g.act(g.bn(g.conv(x, f1, 1, s, "valid")), "relu")
        y = g.act(g.bn(g.conv(y, f2, 3, 1, "same")), "relu")
        y = g.bn(g.conv(y, f3, 1, 1, "valid"))
        sc = g.bn(g.conv(x, f3, 1, s, "valid")) if shortcut_conv else x
        return g.act(g.add([y, sc]), "relu")

    for f, n, s in [((64, 64, 256), 3, 1), ((128, 128, 512), 4, 2),
                    ((256, 256, 1024), 6, 2), ((512, 512, 2048), 3, 2)]:
        x = block(x, f, s, True)
        for _ in range(n - 1):
            x = block(x, f, 1, False)
    x = g.gap(x)
    g.dense(x, 1000, act="softmax", name="fc1000")
    return g


def densenet(name, blocks):
    g = Graph(name)
    x = g.input(3, 224, 224)
    x = g.pad(x, (3, 3))
    x = g.conv(x, 64, 7, 2, "valid", bias=False)
    x = g.act(g.bn(x), "relu")
    x = g.pad(x, (1, 1))
    x = g.pool(x, "max", 3, 2)
    for i, n in enumerate(blocks):
        for _ in range(n):
            y = g.act(g.bn(x), "relu")
            y = g.conv(y, 128, 1, bias=False)
            y = g.act(g.bn(y), "relu")
            y = g.conv(y, 32, 3, 1, "same", bias=False)
            x = g.concat([x, y])
        if i < len(blocks) - 1:
            x = g.act(g.bn(x), "relu")
            x = g.conv(x, x.shape[0] // 2, 1, bias=False)
            x = g.pool(x, "avg", 2, 2)
    x = g.act(g.bn(x), "relu")
    x = g.gap(x)
    g.dense(x, 1000, act="softmax", name="fc1000")
    return g


def inception_v3(size=299):
    g = Graph("keras_inception_v3")

    def cbn(x, f, kh, kw, s=1, padding="same"):
        x = g.conv(x, f, (kh, kw), s, padding, bias=False)
        return g.act(g.bn(x, scale=False), "relu")

    x = g.input(3, size, size)
    x = cbn(x, 32, 3, 3, 2, "valid")
    x = cbn(x, 32, 3, 3, 1, "valid")
    x = cbn(x, 64, 3, 3)
    x = g.pool(x, "max", 3, 2)
    x = cbn(x, 80, 1, 1, 1, "valid")
    x = cbn(x, 192, 3, 3, 1, "valid")
    x = g.pool(x, "max", 3, 2)
    for pool_f in (32, 64, 64):  # mixed 0, 1, 2
        b1 = cbn(x, 64, 1, 1)
        b5 = cbn(cbn(x, 48, 1, 1), 64, 5, 5)
        b3 = cbn(cbn(cbn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3)
        bp = cbn(g.pool(x, "avg", 3, 1, "same"), pool_f, 1, 1)
        x = g.concat([b1, b5, b3, bp])
    b3 = cbn(x, 384, 3, 3, 2, "valid")  # mixed 3
    bd = cbn(cbn(cbn(x, 64, 1, 1), 96, 3, 3), 96, 3, 3, 2, "valid")
    bp = g.pool(x, "max", 3, 2)
    x = g.concat([b3, bd, bp])
    for c7 in (128, 160, 160, 192):  # mixed 4-7
        b1 = cbn(x, 192, 1, 1)
        b7 = cbn(cbn(cbn(x, c7, 1, 1), c7, 1, 7), 192, 7, 1)
        bd = cbn(x, c7, 1, 1)
        bd = cbn(bd, c7, 7, 1)
        bd = cbn(bd, c7, 1, 7)
        bd = cbn(bd, c7, 7, 1)
        bd = cbn(bd, 192, 1, 7)
        bp = cbn(g.pool(x, "avg", 3, 1, "same"), 192, 1, 1)
        x = g.concat([b1, b7, bd, bp])
    b3 = cbn(cbn(x, 192, 1, 1), 320, 3, 3, 2, "valid")  # mixed 8
    b7 = cbn(cbn(cbn(cbn(x, 192, 1, 1), 192, 1, 7), 192, 7, 1), 192, 3, 3, 2, "valid")
    bp = g.pool(x, "max", 3, 2)
    x = g.concat([b3, b7, bp])
    for _ in range(2):  # mixed 9, 10
        b1 = cbn(x, 320, 1, 1)
        b3 = cbn(x, 384, 1, 1)
        b3 = g.concat([cbn(b3, 384, 1, 3), cbn(b3, 384, 3, 1)])
        bd = cbn(cbn(x, 448, 1, 1), 384, 3, 3)
        bd = g.concat([cbn(bd, 384, 1, 3), cbn(bd, 384, 3, 1)])
        bp = cbn(g.pool(x, "avg", 3, 1, "same"), 192, 1, 1)
        x = g.concat([b1, b3, bd, bp])
    x = g.gap(x)
    g.dense(x, 1000, act="softmax", name="predictions")
    return g


def inception_resnet_v2(size=299):
    g = Graph("keras_inception_resnet_v2")

    def cbn(x, f, k, s=1, padding="same", act=True):
        x = g.conv(x, f, k, s, padding, bias=False)
        x = g.bn(x, scale=False)
        return g.act(x, "relu") if act else x

    x = g.input(3, size, size)
    x = cbn(x, 32, 3, 2, "valid")
    x = cbn(x, 32, 3, 1, "valid")
    x = cbn(x, 64, 3)
    x = g.pool(x, "max", 3, 2)
    x = cbn(x, 80, 1, 1, "valid")
    x = cbn(x, 192, 3, 1, "valid")
    x = g.pool(x, "max", 3, 2)
    b0 = cbn(x, 96, 1)
    b1 = cbn(cbn(x, 48, 1), 64, 5)
    b2 = cbn(cbn(cbn(x, 64, 1), 96, 3), 96, 3)
    bp = cbn(g.pool(x, "avg", 3, 1, "same"), 64, 1)
    x = g.concat([b0, b1, b2, bp])

    def irb(x, kind, act=True):
        if kind == 35:
            br = [cbn(x, 32, 1), cbn(cbn(x, 32, 1), 32, 3),
                  cbn(cbn(cbn(x, 32, 1), 48, 3), 64, 3)]
        elif kind == 17:
            br = [cbn(x, 192, 1), cbn(cbn(cbn(x, 128, 1), 160, (1, 7)), 192, (7, 1))]
        else:
            br = [cbn(x, 192, 1), cbn(cbn(cbn(x, 192, 1), 224, (1, 3)), 256, (3, 1))]
        mixed = g.concat(br)
        up = g.conv(mixed, x.shape[0], 1, bias=True)  # conv2d_bn(use_bias=True): no BN
        x = g.scaled_residual(x, up, None)
        return g.act(x, "relu") if act else x

    for _ in range(10):
        x = irb(x, 35)
    b0 = cbn(x, 384, 3, 2, "valid")
    b1 = cbn(cbn(cbn(x, 256, 1), 256, 3), 384, 3, 2, "valid")
    bp = g.pool(x, "max", 3, 2)
    x = g.concat([b0, b1, bp])
    for _ in range(20):
        x = irb(x, 17)
    b0 = cbn(cbn(x, 256, 1), 384, 3, 2, "valid")
    b1 = cbn(cbn(x, 256, 1), 288, 3, 2, "valid")
    b2 = cbn(cbn(cbn(x, 256, 1), 288, 3), 320, 3, 2, "valid")
    bp = g.pool(x, "max", 3, 2)
    x = g.concat([b0, b1, b2, bp])
    for _ in range(9):
        x = irb(x, 8)
    x = irb(x, 8, act=False)
    x = cbn(x, 1536, 1)
    x = g.gap(x)
    g.dense(x, 1000, act="softmax", name="predictions")
    return g


def mobilenet_v1():
    g = Graph("keras_mobilenet")
    x = g.input(3, 224, 224)
    x = g.pad(x, (0, 1))
    x = g.conv(x, 32, 3, 2, "valid", bias=False)
    x = g.act(g.bn(x), "relu6")
    for f, s in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + \
            [(512, 1)] * 5 + [(1024, 2), (1024, 1)]:
        if s == 2:
            x = g.pad(x, (0, 1))
        x = g.dwconv(x, 3, s, "same" if s == 1 else "valid")
        x = g.act(g.bn(x), "relu6")
        x = g.conv(x, f, 1, bias=False)
        x = g.act(g.bn(x), "relu6")
    x = g.gap(x)
    x = g.reshape(x, (1024, 1, 1))
    x = g.dropout(x)
    x = g.conv(x, 1000, 1, bias=True)  # conv_preds
    x = g.act(x, "softmax")
    g.reshape(x, (1000,))
    return g


# MobileNetV2's inverted residual blocks: (filters, stride, expansion)
MOBILENET_V2_BLOCKS = [(16, 1, 1)] + [(24, 2, 6), (24, 1, 6)] + [(32, 2, 6)] + [(32, 1, 6)] * 2 + \
    [(64, 2, 6)] + [(64, 1, 6)] * 3 + [(96, 1, 6)] * 3 + [(160, 2, 6)] + \
    [(160, 1, 6)] * 2 + [(320, 1, 6)]


def mobilenet_v2():
    g = Graph("keras_mobilenet_v2")
    x = g.input(3, 224, 224)
    x = g.pad(x, correct_pad(224, 3))
    x = g.conv(x, 32, 3, 2, "valid", bias=False)
    x = g.act(g.bn(x), "relu6")
    for bid, (f, s, e) in enumerate(MOBILENET_V2_BLOCKS):
        inp = x
        cin = x.shape[0]
        if bid:
            x = g.conv(x, e * cin, 1, bias=False)
            x = g.act(g.bn(x), "relu6")
        if s == 2:
            x = g.pad(x, correct_pad(x.shape[1], 3))
        x = g.dwconv(x, 3, s, "same" if s == 1 else "valid")
        x = g.act(g.bn(x), "relu6")
        x = g.conv(x, f, 1, bias=False)
        x = g.bn(x)
        if cin == f and s == 1:
            x = g.add([inp, x])
    x = g.conv(x, 1280, 1, bias=False)
    x = g.act(g.bn(x), "relu6")
    x = g.gap(x)
    g.dense(x, 1000, act="softmax", name="Logits")
    return g


def nasnet(name, size, penultimate, nblocks, stem_filters, skip_reduction):
    g = Graph(name)
    fm = 2
    filters = penultimate // 24

    def sep_block(ip, f, k=3, s=1):
        x = g.act(ip, "relu")
        if s == 2:
            x = g.pad(x, correct_pad(x.shape[1], k))
            x = g.sepconv(x, f, k, 2, "valid")
        else:
            x = g.sepconv(x, f, k, 1, "same")
        x = g.bn(x)
        x = g.act(x, "relu")
        x = g.sepconv(x, f, k, 1, "same")
        return g.bn(x)

    def adjust(p, ip, f):
        if p is None:
            return ip
        if p.shape[1] != ip.shape[1]:
            p = g.act(p, "relu")
            p1 = g.pool(p, "avg", 1, 2, "valid")
            p1 = g.conv(p1, f // 2, 1, bias=False)
            p2 = g.pad(p, (0, 1))
            p2 = g.crop(p2, (1, 0), (1, 0))
            p2 = g.pool(p2, "avg", 1, 2, "valid")
            p2 = g.conv(p2, f // 2, 1, bias=False)
            p = g.concat([p1, p2])
            return g.bn(p)
        if p.shape[0] != f:
            p = g.act(p, "relu")
            p = g.conv(p, f, 1, bias=False)
            return g.bn(p)
        return p

    def normal(ip, p, f):
        p = adjust(p, ip, f)
        h = g.bn(g.conv(g.act(ip, "relu"), f, 1, bias=False))
        x1 = g.add([sep_block(h, f, 5), sep_block(p, f, 3)])
        x2 = g.add([sep_block(p, f, 5), sep_block(p, f, 3)])
        x3 = g.add([g.pool(h, "avg", 3, 1, "same"), p])
        x4 = g.add([g.pool(p, "avg", 3, 1, "same"), g.pool(p, "avg", 3, 1, "same")])
        x5 = g.add([sep_block(h, f, 3), h])
        return g.concat([p, x1, x2, x3, x4, x5]), ip

    def reduction(ip, p, f):
        p = adjust(p, ip, f)
        h = g.bn(g.conv(g.act(ip, "relu"), f, 1, bias=False))
        h3 = g.pad(h, correct_pad(h.shape[1], 3))
        x1 = g.add([sep_block(h, f, 5, 2), sep_block(p, f, 7, 2)])
        x2 = g.add([g.pool(h3, "max", 3, 2, "valid"), sep_block(p, f, 7, 2)])
        x3 = g.add([g.pool(h3, "avg", 3, 2, "valid"), sep_block(p, f, 5, 2)])
        x4 = g.add([g.pool(x1, "avg", 3, 1, "same"), x2])
        x5 = g.add([sep_block(x1, f, 3), g.pool(h3, "max", 3, 2, "valid")])
        return g.concat([x2, x3, x4, x5]), ip

    img = g.input(3, size, size)
    x = g.conv(img, stem_filters, 3, 2, "valid", bias=False)
    x = g.bn(x)
    p = None
    x, p = reduction(x, p, filters // fm ** 2)
    x, p = reduction(x, p, filters // fm)
    for _ in range(nblocks):
        x, p = normal(x, p, filters)
    x, p0 = reduction(x, p, filters * fm)
    p = p0 if not skip_reduction else p
    for _ in range(nblocks):
        x, p = normal(x, p, filters * fm)
    x, p0 = reduction(x, p, filters * fm ** 2)
    p = p0 if not skip_reduction else p
    for _ in range(nblocks):
        x, p = normal(x, p, filters * fm ** 2)
    x = g.act(x, "relu")
    x = g.gap(x)
    g.dense(x, 1000, act="softmax", name="predictions")
    return g


BUILDERS = {
    "keras_resnet50": (resnet50, "ResNet50", 224),
    "keras_vgg16": (lambda: vgg("keras_vgg16", [2, 2, 3, 3, 3]), "VGG16", 224),
    "keras_vgg19": (lambda: vgg("keras_vgg19", [2, 2, 4, 4, 4]), "VGG19", 224),
    "keras_densenet121": (lambda: densenet("keras_densenet121", [6, 12, 24, 16]),
                          "DenseNet121", 224),
    "keras_densenet169": (lambda: densenet("keras_densenet169", [6, 12, 32, 32]),
                          "DenseNet169", 224),
    "keras_inception_resnet_v2": (inception_resnet_v2, "InceptionResNetV2", 299),
    "keras_inception_v3": (inception_v3, "InceptionV3", 299),
    "keras_mobilenet": (mobilenet_v1, "MobileNet (v1, alpha 1.0)", 224),
    "keras_mobilenet_v2": (mobilenet_v2, "MobileNetV2 (alpha 1.0)", 224),
    "keras_nasnet_large": (lambda: nasnet("keras_nasnet_large", 331, 4032, 6, 96, True),
                           "NASNetLarge", 331),
    "keras_nasnet_mobile": (lambda: nasnet("keras_nasnet_mobile", 224, 1056, 4, 32, False),
                            "NASNetMobile", 224),
}


ALT_224 = {
    "keras_inception_resnet_v2": lambda: inception_resnet_v2(224),
    "keras_inception_v3": lambda: inception_v3(224),
    "keras_nasnet_large": lambda: nasnet("keras_nasnet_large", 224, 4032, 6, 96, True),
}


# ----------------------------------------------------------------------------------------
# Kernel-count rule (TF 1.13, GPU, one training step / one inference batch)
# ----------------------------------------------------------------------------------------

FWD_KERNELS = {"Conv2D": 1, "DepthwiseConv2dNative": 1, "BiasAdd": 1, "FusedBatchNorm": 1,
               "Relu": 1, "Relu6": 1, "Softmax": 1, "MaxPool": 1, "AvgPool": 1, "Mean": 1,
               "Add": 1, "Mul": 1, "ConcatV2": 1, "Pad": 1, "StridedSlice": 1, "MatMul": 1,
               "Reshape": 0}
BN_TRAIN_EXTRA = 7      # Bessel-factor Mul + 2 x (Sub, Mul, AssignSub) moving averages
DROPOUT_TRAIN = 4       # RandomUniform, GreaterEqual, Cast, Mul (+ scale folded)
LOSS_METRIC_FWD = 14    # categorical cross-entropy (div, sum, clip x2, log, mul, sum, neg,
                        # mean) + categorical_accuracy (argmax x2, equal, cast, mean)
LOSS_BWD = 10
OPT_PER_VAR = 1         # optimizer_v2 SGD(momentum): ResourceApplyKerasMomentum per variable
OPT_FIXED = 1           # iterations += 1


def bwd_kernels(op):
    """GPU kernels of the gradient of one op (0 where nothing upstream needs a gradient)."""
    t = op.type
    rg_in = [x.rg for x in op.inputs]
    has_tvar = any(v[2] for v in op.vars)
    if not (has_tvar or any(rg_in)):
        return 0
    if t in ("Conv2D", "DepthwiseConv2dNative", "MatMul"):
        return 1 + (1 if rg_in[0] else 0)          # filter grad + input grad
    if t == "BiasAdd":
        return 1                                   # BiasAddGrad (input grad is identity)
    if t == "FusedBatchNorm":
        return 1                                   # FusedBatchNormGrad
    if t in ("Relu", "Relu6", "MaxPool", "AvgPool", "Mul", "Pad", "StridedSlice", "Dropout"):
        return 1 if rg_in[0] else 0
    if t == "Mean":
        return 2 if rg_in[0] else 0                # Tile + RealDiv
    if t == "ConcatV2":
        return sum(1 for r in rg_in if r)           # one Slice per input (ConcatOffset on host)
    if t in ("Add", "Reshape", "Softmax"):
        return 0                                   # same-shape Add: identity; Softmax in loss
    raise ValueError(t)


def saved_for_backward(op):
    """Tensors a gradient op of `op` reads (tids)."""
    t = op.type
    if not (op.output.rg):
        return []
    if t in ("Conv2D", "DepthwiseConv2dNative", "MatMul", "FusedBatchNorm"):
        return [op.inputs[0].tid]
    if t in ("Relu", "Relu6", "Softmax"):
        return [op.output.tid]
    if t == "MaxPool":
        return [op.inputs[0].tid, op.output.tid]
    return []


# ----------------------------------------------------------------------------------------
# Analysis
# ----------------------------------------------------------------------------------------

def buf(g, t):
    """Buffer id of a tensor (aliases share their source's buffer)."""
    while t.alias_of is not None:
        t = g.tensors[t.alias_of]
    return t.tid


def analyse(g):
    ops = g.ops
    n = len(ops)
    vars_all = [v for op in ops for v in op.vars]
    p_total = sum(v[1] for v in vars_all)
    p_train = sum(v[1] for v in vars_all if v[2])
    v_total = len(vars_all)
    v_train = sum(1 for v in vars_all if v[2])

    # materialised buffers (aliases excluded); Dropout's mask counted as an extra buffer
    real = [t for t in g.tensors if t.alias_of is None]
    sum_out = sum(t.elems for t in real)
    dropout_mask = sum(op.inputs[0].elems for op in ops if op.type == "Dropout")

    saved = set()
    for op in ops:
        for tid in saved_for_backward(op):
            saved.add(buf(g, g.tensors[tid]))
    saved_elems = sum(g.tensors[b].elems for b in saved) + dropout_mask

    # --- inference liveness: tensor freed after its last consumer (aliases extend life) ---
    last_use = {}
    for op in ops:
        for x in op.inputs:
            last_use[buf(g, x)] = op.idx
    live = 0
    peak_inf = 0
    inp = g.tensors[0]
    live += inp.elems
    for op in ops:
        out = op.output
        if out.alias_of is None:
            live += out.elems
        peak_inf = max(peak_inf, live)
        for x in set(buf(g, y) for y in op.inputs):
            if last_use.get(x) == op.idx:
                live -= g.tensors[x].elems
        if out.alias_of is None and buf(g, out) not in last_use:
            live -= out.elems  # network output: counted at its peak, then handed back
    # --- training liveness: forward, then backward in reverse op order ---
    # saved buffer b is needed until the backward of the earliest op that saves it
    save_until = {}  # buffer -> backward position (smaller op idx = later in backward)
    for op in ops:
        for tid in saved_for_backward(op):
            b = buf(g, g.tensors[tid])
            save_until[b] = min(save_until.get(b, n), op.idx)
    live = inp.elems
    peak_fwd = 0
    for op in ops:
        out = op.output
        if out.alias_of is None:
            live += out.elems
        if op.type == "Dropout":
            live += op.inputs[0].elems  # mask kept for backward
        peak_fwd = max(peak_fwd, live)
        for x in set(buf(g, y) for y in op.inputs):
            if last_use.get(x) == op.idx and x not in save_until:
                live -= g.tensors[x].elems
        ob = buf(g, out)
        if out.alias_of is None and ob not in last_use and ob not in save_until:
            live -= out.elems
    # backward: gradient buffers. grad of tensor T (size of T) exists from the backward of
    # T's last consumer (processed first) until T's producer's backward has run.
    grad_live = {}
    peak_train = peak_fwd
    for op in reversed(ops):
        out = op.output
        # gradient of this op's output must be live (created by consumers' backward)
        ob = buf(g, out)
        if out.rg and ob not in grad_live:
            grad_live[ob] = out.elems   # loss gradient for the network output
            live += out.elems
        peak_train = max(peak_train, live)
        # produce gradients for inputs needing them
        for x in op.inputs:
            xb = buf(g, x)
            if x.rg and xb not in grad_live and bwd_kernels(op) > 0:
                grad_live[xb] = x.elems
                live += x.elems
        peak_train = max(peak_train, live)
        # free this op's output gradient (its producer's backward is this step) unless alias
        if out.alias_of is None and ob in grad_live:
            live -= grad_live.pop(ob)
        # free saved tensors whose last backward user is this op
        for b, until in list(save_until.items()):
            if until == op.idx:
                live -= g.tensors[b].elems
                del save_until[b]
        if op.type == "Dropout":
            live -= op.inputs[0].elems

    macs_layers = sorted((op.macs for op in ops if op.macs > 0), reverse=True)
    macs_total = sum(macs_layers)
    k10 = max(1, math.ceil(0.1 * len(macs_layers)))

    fwd_inf = sum(FWD_KERNELS.get(op.type, 0) for op in ops)  # Dropout: identity at inference
    fwd_train = fwd_inf
    fwd_train += sum(BN_TRAIN_EXTRA for op in ops if op.type == "FusedBatchNorm")
    fwd_train += sum(DROPOUT_TRAIN for op in ops if op.type == "Dropout")
    fwd_train += LOSS_METRIC_FWD
    bwd = sum(bwd_kernels(op) for op in ops) + LOSS_BWD
    # gradient aggregation: one AddN per tensor with >1 consumers that send it a gradient
    addn = 0
    for t in g.tensors:
        if t.rg and sum(1 for c in t.consumers
                        if bwd_kernels(c) > 0 or c.type in ("Add", "Reshape")) > 1:
            addn += 1
    bwd += addn
    opt = v_train * OPT_PER_VAR + OPT_FIXED

    counts = {}
    for op in ops:
        counts[op.type] = counts.get(op.type, 0) + 1

    def mib(elems):
        return round(elems * F32 / MIB, 3)

    return {
        "params_total": p_total, "params_trainable": p_train,
        "variables_total": v_total, "variables_trainable": v_train,
        "gmacs": macs_total / 1e9,
        "largest_layer_gmacs": macs_layers[0] / 1e9,
        "mac_layers": len(macs_layers),
        "top10pct_share": sum(macs_layers[:k10]) / macs_total,
        "median_layer_gmacs": macs_layers[len(macs_layers) // 2] / 1e9,
        "p90_layer_gmacs": macs_layers[len(macs_layers) // 10] / 1e9,
        "sum_out_mib": mib(sum_out + dropout_mask),
        "saved_mib": mib(saved_elems),
        "train_peak_mib": mib(peak_train),
        "infer_peak_mib": mib(peak_inf),
        "k_fwd_inf": fwd_inf, "k_fwd_train": fwd_train, "k_bwd": bwd, "k_opt": opt,
        "k_addn": addn,
        "op_counts": counts,
        "tf_ops": len(ops),
        "keras_layers": g.n_keras_layers,
    }


# ----------------------------------------------------------------------------------------
# NMT (TF NMT tutorial, WMT'16 de->en, GNMT 4-layer) — an estimate, see README
# ----------------------------------------------------------------------------------------

NMT = {
    "hparams": "tensorflow/nmt nmt/standard_hparams/wmt16_gnmt_4_layer.json",
    "num_units": 1024, "encoder_layers": 4, "bi_layers": 1, "decoder_layers": 4,
    "attention": "normed_bahdanau", "attention_architecture": "gnmt_v2", "beam_width": 10,
    "vocab": 36549, "src_len": 30, "tgt_steps": 32, "batch": 1,
}


def nmt_facts():
    u = NMT["num_units"]
    V = NMT["vocab"]
    lstm = lambda nin: (nin + u) * 4 * u + 4 * u  # kernel + bias
    enc = [lstm(u), lstm(u),            # bidirectional layer: fw, bw
           lstm(2 * u), lstm(u), lstm(u)]  # 3 unidirectional layers (first takes fw|bw)
    dec = [lstm(2 * u)] + [lstm(2 * u)] * 3  # attention layer + 3 GNMT layers (input|context)
    att = [u * u, u * u, u, 1, u]          # memory_layer, query_layer, v, g, b
    emb = [V * u, V * u]
    proj = [u * V]                         # output projection, no bias
    n_vars = len(emb) + 2 * len(enc) + 2 * len(dec) + len(att) + len(proj)
    params = sum(emb) + sum(enc) + sum(dec) + sum(att) + sum(proj)
    L, T, B = NMT["src_len"], NMT["tgt_steps"], NMT["beam_width"]
    enc_macs_tok = sum(p - 4 * u for p in enc)  # kernel MACs per token (bias excluded)
    dec_macs_step = B * (sum(p - 4 * u for p in dec) + u * u + 2 * L * u + u * V)
    macs = L * (enc_macs_tok + u * u) + T * dec_macs_step
    # kernels: BasicLSTMCell step = 14 (concat, matmul, bias_add, split, add forget_bias,
    # 3 sigmoid, 2 tanh, 3 mul, 1 add); encoder: 2 bi + 3 uni cells + 2 residual adds per
    # token + 5 loop kernels per loop (3 loops); decoder step: 4 cells + 3 GNMT concats +
    # 3 residual adds + 17 attention + 1 projection + 45 beam-search kernels.
    k_enc_tok = 5 * 14 + 2 + 3 * 5
    k_dec_step = 4 * 14 + 3 + 3 + 17 + 1 + 45
    k_inf = L * k_enc_tok + T * k_dec_step + 10
    # per-step largest MatMul: the beam's output projection
    largest = B * u * V / 1e9
    # activations per sentence (inference): encoder outputs kept as attention memory
    # (L x 1024, plus keys L x 1024), decoder states B x (4 layers x (c,h)) + logits B x V.
    infer_peak = (2 * L * u + B * 8 * u + 2 * B * V + L * 2 * u) * F32 / MIB
    return {
        "params": params, "vars": n_vars, "gmacs": macs / 1e9, "largest": largest,
        "k_inf": k_inf, "k_dec_step": k_dec_step, "k_enc_tok": k_enc_tok,
        "infer_peak_mib": infer_peak,
    }


# ----------------------------------------------------------------------------------------

def torch_crosscheck():
    import torch
    import torchvision.models as tvm
    rows = []
    for name, ctor, size in [("resnet50", tvm.resnet50, 224), ("vgg16", tvm.vgg16, 224),
                             ("vgg19", tvm.vgg19, 224), ("densenet121", tvm.densenet121, 224),
                             ("densenet169", tvm.densenet169, 224),
                             ("inception_v3", lambda: tvm.inception_v3(aux_logits=False,
                                                                       init_weights=False), 299),
                             ("mobilenet_v2", tvm.mobilenet_v2, 224)]:
        m = ctor().eval()
        params = sum(p.numel() for p in m.parameters())
        outs = []
        macs = [0]

        def hook(mod, inp, out):
            if isinstance(out, torch.Tensor):
                outs.append(out.numel())
            if isinstance(mod, torch.nn.Conv2d):
                macs[0] += out.numel() * mod.in_channels // mod.groups * \
                    mod.kernel_size[0] * mod.kernel_size[1]
            elif isinstance(mod, torch.nn.Linear):
                macs[0] += mod.in_features * mod.out_features

        leaves = [mm for mm in m.modules() if len(list(mm.children())) == 0]
        hs = [mm.register_forward_hook(hook) for mm in leaves]
        with torch.no_grad():
            m(torch.zeros(1, 3, size, size))
        for h in hs:
            h.remove()
        rows.append((name, params, macs[0] / 1e9, sum(outs) * 4 / MIB))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent /
                                         "data" / "sched" / "models.json"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--torch", action="store_true")
    args = ap.parse_args()

    models = {}
    print(f"{'model':28s} {'params':>11s} {'train':>11s} {'vars':>5s} {'tvars':>5s} "
          f"{'state':>8s} {'T1':>8s} {'GMAC':>7s} {'sumout':>7s} {'saved':>7s} "
          f"{'trpeak':>7s} {'infpk':>6s} {'kinf':>5s} {'ktrain':>6s}")
    for mid, (ctor, name, size) in BUILDERS.items():
        g = ctor()
        a = analyse(g)
        state = (a["params_total"] + a["params_trainable"]) * F32 / MIB
        t1 = TABLE1_MIB.get(mid)
        table = KERAS_TABLE_PARAMS[mid]
        assert a["params_total"] == table, (mid, a["params_total"], table)
        k_train = a["k_fwd_train"] + a["k_bwd"] + a["k_opt"]
        print(f"{mid:28s} {a['params_total']:11d} {a['params_trainable']:11d} "
              f"{a['variables_total']:5d} {a['variables_trainable']:5d} {state:8.2f} "
              f"{(t1 or 0):8.2f} {a['gmacs']:7.3f} {a['sum_out_mib']:7.2f} "
              f"{a['saved_mib']:7.2f} {a['train_peak_mib']:7.2f} {a['infer_peak_mib']:6.2f} "
              f"{a['k_fwd_inf']:5d} {k_train:6d}")
        entry = {
            "name": "Keras " + name,
            "framework": "tf.keras 1.13 (keras-applications 1.0.8 layer structure), 1000 classes",
            "input_size": size,
            "params_total": a["params_total"],
            "params_trainable": a["params_trainable"],
            "params_non_trainable": a["params_total"] - a["params_trainable"],
            "variables_total": a["variables_total"],
            "variables_trainable": a["variables_trainable"],
            "state_tensors_train": a["variables_total"] + a["variables_trainable"],
            "state_mib": round(state, 3),
            "table1_state_mib": t1,
            "table1_diff_mib": None if t1 is None else round(t1 - state, 3),
            "table1_diff_pct": None if t1 is None else round(100 * (t1 - state) / state, 2),
            "weights_mib": round(a["params_total"] * F32 / MIB, 3),
            "gmacs_per_image": round(a["gmacs"], 4),
            "train_activation_mib_per_image": a["saved_mib"],
            "train_all_outputs_mib_per_image": a["sum_out_mib"],
            "train_peak_activation_mib_per_image": a["train_peak_mib"],
            "infer_peak_activation_mib_per_image": a["infer_peak_mib"],
            "gpu_kernels_per_inference": a["k_fwd_inf"],
            "gpu_kernels_per_train_step": a["k_fwd_train"] + a["k_bwd"] + a["k_opt"],
            "gpu_kernels_train_breakdown": {"forward": a["k_fwd_train"],
                                            "backward": a["k_bwd"],
                                            "optimizer": a["k_opt"],
                                            "gradient_addn": a["k_addn"]},
            "mac_layers": a["mac_layers"],
            "largest_layer_gmacs_per_image": round(a["largest_layer_gmacs"], 5),
            "median_layer_gmacs_per_image": round(a["median_layer_gmacs"], 6),
            "p90_layer_gmacs_per_image": round(a["p90_layer_gmacs"], 6),
            "top10pct_layers_mac_share": round(a["top10pct_share"], 4),
            "tf_ops_forward": a["tf_ops"],
            "tf_op_counts": a["op_counts"],
            "sources": [
                "layer structure: keras-team/keras-applications 1.0.8 (" + KERAS_FILE[mid] + ")",
                "params_total cross-checked: Keras Applications table (keras.io/applications)",
                "state_mib vs Table 1: SwitchFlow Table 1 (shared/reference/switchflow-results.md)",
                "optimizer/BN op rules: switchflow benchmarks/experiment/benchmarks.py "
                "(optimizer_v2 SGD momentum 0.9); tf.keras 1.13 BatchNormalization",
                "derived by scripts/sched_model_facts.py (MACs, activations, kernels)",
            ] + EXTRA_SOURCES.get(mid, []),
            "exactness": {
                "params_total": "exact (layer list; equals the Keras Applications table)",
                "params_trainable": "exact (BN moving mean/variance are the non-trainable part)",
                "variables": "exact (one tensor per kernel/bias/gamma/beta/moving stat)",
                "gmacs_per_image": "exact count of conv/dense multiply-accumulates",
                "activations": "derived by the stated rule (not measured)",
                "kernels": "estimate by the stated rule (not profiled)",
            },
        }
        if size != 224:
            g224 = ALT_224[mid]()
            b = analyse(g224)
            assert b["params_total"] == a["params_total"]
            entry["at_input_224"] = {
                "_why": "the ImageNet pipeline of Figs. 3/8-10 resizes to 224 and the "
                        "Benchmark class defaults to 224x224; which size the paper fed "
                        "this model is not stated",
                "gmacs_per_image": round(b["gmacs"], 4),
                "train_activation_mib_per_image": b["saved_mib"],
                "train_all_outputs_mib_per_image": b["sum_out_mib"],
                "train_peak_activation_mib_per_image": b["train_peak_mib"],
                "infer_peak_activation_mib_per_image": b["infer_peak_mib"],
                "largest_layer_gmacs_per_image": round(b["largest_layer_gmacs"], 5),
                "top10pct_layers_mac_share": round(b["top10pct_share"], 4),
            }
        models[mid] = entry

    nm = nmt_facts()
    print(f"{'nmt_wmt16':28s} {nm['params']:11d} {nm['params']:11d} {nm['vars']:5d} "
          f"{nm['vars']:5d} {2 * nm['params'] * 4 / MIB:8.2f} {'':8s} {nm['gmacs']:7.3f} "
          f"{'':7s} {'':7s} {'':7s} {nm['infer_peak_mib']:6.2f} {nm['k_inf']:5d}")
    models["nmt_wmt16"] = {
        "name": "TF NMT tutorial GNMT, WMT'16 German->English (assumed architecture)",
        "assumed_architecture": {
            "source": NMT["hparams"] + " (the tutorial's pre-trained de->en GNMT model)",
            "unit_type": "LSTM (BasicLSTMCell)", "num_units": NMT["num_units"],
            "embedding_dim": NMT["num_units"],
            "encoder": "gnmt: 1 bidirectional layer + 3 unidirectional layers, "
                       "residual on the last 2",
            "decoder": "4 layers, GNMT v2 attention (bottom layer queries "
                       "normed_bahdanau attention; context fed to every layer), "
                       "residual on the top 3",
            "vocab_src": NMT["vocab"], "vocab_tgt": NMT["vocab"],
            "vocab_note": "joint BPE 32k merges (wmt16_en_de.sh) gives a shared file of "
                          "~36.5k entries; 36549 assumed (not verified); separate src/tgt "
                          "embeddings (share_vocab false)",
            "beam_width": NMT["beam_width"],
            "inference_batch": NMT["batch"],
            "source_length_tokens": NMT["src_len"],
            "decode_steps": NMT["tgt_steps"],
            "length_note": "newstest sentences average ~25-30 BPE tokens; decoding "
                           "stops when all beams end (max 2x source length)",
        },
        "input_size": None,
        "params_total": nm["params"],
        "params_trainable": nm["params"],
        "params_non_trainable": 0,
        "variables_total": nm["vars"],
        "variables_trainable": nm["vars"],
        "state_tensors_train": 2 * nm["vars"],
        "state_mib": round(2 * nm["params"] * F32 / MIB, 2),
        "table1_state_mib": None, "table1_diff_mib": None, "table1_diff_pct": None,
        "weights_mib": round(nm["params"] * F32 / MIB, 2),
        "gmacs_per_image": round(nm["gmacs"], 2),
        "gmacs_unit": "per sentence (encoder 30 tokens + 32 beam-10 decode steps)",
        "train_activation_mib_per_image": None,
        "train_all_outputs_mib_per_image": None,
        "train_peak_activation_mib_per_image": None,
        "infer_peak_activation_mib_per_image": round(nm["infer_peak_mib"], 2),
        "gpu_kernels_per_inference": nm["k_inf"],
        "gpu_kernels_per_decode_step": nm["k_dec_step"],
        "gpu_kernels_per_source_token": nm["k_enc_tok"],
        "host_syncs_per_inference": NMT["tgt_steps"],
        "host_sync_note": "the beam-search while_loop's condition (not all beams finished) "
                          "is computed on the GPU and copied to the host every decode step; "
                          "the encoder loops count int32 time steps in host memory (no sync)",
        "gpu_kernels_per_train_step": None,
        "largest_layer_gmacs_per_image": round(nm["largest"], 4),
        "largest_layer_note": "output projection of one decode step (beam 10 x 1024 x vocab)",
        "top10pct_layers_mac_share": None,
        "sources": [
            "tensorflow/nmt nmt/standard_hparams/wmt16_gnmt_4_layer.json (units 1024, 4+4 "
            "layers, gnmt encoder, gnmt_v2 normed_bahdanau attention, beam 10, BPE)",
            "tensorflow/nmt README, WMT German-English benchmark (4-layer LSTMs of 1024 "
            "units, embedding 1024, BPE 32K operations, GNMT-attention model published)",
            "vocabulary size, sentence length, batch 1 and the kernel counts per cell: "
            "assumptions of scripts/sched_model_facts.py",
            "SwitchFlow Fig. 6(d): NMT inference only, ~0.72-0.77 s per request under "
            "SwitchFlow (shared/reference/switchflow-results.md)",
        ],
        "exactness": {
            "params_total": "estimate (architecture and vocabulary assumed)",
            "everything_else": "estimate",
        },
        "used_in_paper": "inference only (Fig. 6d); no training figures",
    }

    import sched_model_facts_torch  # the torchvision models of the real H200 run (their own file)
    models.update(sched_model_facts_torch.entries())

    if args.torch:
        print("\ntorchvision cross-check (batch 1; params, GMACs, sum of leaf-module outputs MiB)")
        for name, params, gm, act in torch_crosscheck():
            print(f"  {name:14s} {params:11d} {gm:7.3f} {act:8.2f}")

    if args.check:
        return
    out = Path(args.out)
    doc = {
        "_about": "Per-model facts for the SwitchFlow twin (sim/share_twin). Generated by "
                  "scripts/sched_model_facts.py; field meanings, rules and sources in "
                  "data/sched/README.md. Per-image values are float32 and scale linearly "
                  "with batch size.",
        "_generator": "scripts/sched_model_facts.py",
        "models": models,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
