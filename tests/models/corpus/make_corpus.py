#!/usr/bin/env python3
"""Builds Kiln's real-model corpus: other people's architectures, random weights, several exporters.

Usage:
  make_corpus.py OUT_DIR [--only NAME,... | --subset ci] [--list] [--no-check]

For every model it writes
  OUT_DIR/<name>.onnx              the model (static input shapes, weights embedded)
  OUT_DIR/<name>.json              what it is: source, category, exporter, opset, inputs, outputs
  OUT_DIR/<name>.inputs/<in>.npy   deterministic inputs (seeded from the model and input name)
and OUT_DIR/manifest.json listing every model (and the ones that failed to export).

Everything is deterministic and offline once the packages are installed: every model is
built from a constructor or a config object with random weights (fixed seeds); nothing is
downloaded. Exporters:
  torchscript  torch.onnx.export(..., dynamo=False)   opsets 9..17
  dynamo       torch.onnx.export(..., dynamo=True)    opsets 18+
  tf2onnx      tf2onnx.convert.from_keras(Keras 3 model)

Exit status: 0 when every selected model exported, 1 otherwise (the others are still written).
See README.md beside this file for the venv and the model list.
"""
import argparse
import gc
import hashlib
import json
import math
import os
import sys
import time
import traceback
import zlib

if os.environ.get("PYTHONHASHSEED") != "0" and __name__ == "__main__":
    # tf2onnx names folded constants in set-iteration order: fix the hash seed (it only takes effect
    # at interpreter start) so that the same run writes byte-identical files.
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


class Inp:
    """One model input: name, dtype, static shape and how its values are drawn."""

    def __init__(self, name, shape, dtype="float32", kind="normal", **params):
        self.name, self.shape, self.dtype, self.kind, self.params = name, list(shape), dtype, kind, params

    def describe(self):
        d = {"name": self.name, "dtype": self.dtype, "shape": self.shape}
        if self.kind == "normal":
            d["range"] = {"kind": "normal", "mean": self.params.get("mean", 0.0), "std": self.params.get("std", 1.0)}
        elif self.kind == "uniform":
            d["range"] = {"kind": "uniform", "low": self.params["low"], "high": self.params["high"]}
        elif self.kind == "int":
            d["range"] = {"kind": "int", "low": self.params["low"], "high": self.params["high"],
                          "note": "integers in [low, high)"}
        elif self.kind == "ones":
            d["range"] = {"kind": "constant", "value": 1}
        elif self.kind == "zeros":
            d["range"] = {"kind": "constant", "value": 0}
        return d

    def make(self, model_name):
        seed = zlib.crc32(f"{model_name}/{self.name}".encode())
        rng = np.random.default_rng(seed)
        if self.kind == "normal":
            a = rng.normal(self.params.get("mean", 0.0), self.params.get("std", 1.0), self.shape)
        elif self.kind == "uniform":
            a = rng.uniform(self.params["low"], self.params["high"], self.shape)
        elif self.kind == "int":
            a = rng.integers(self.params["low"], self.params["high"], self.shape)
        elif self.kind == "ones":
            a = np.ones(self.shape)
        elif self.kind == "zeros":
            a = np.zeros(self.shape)
        else:
            raise ValueError(self.kind)
        return np.ascontiguousarray(a.astype(self.dtype))


def image(shape, name="input"):
    return [Inp(name, shape)]


def tokens(vocab, seq, names=("input_ids", "attention_mask")):
    out = []
    for n in names:
        if n in ("input_ids", "decoder_input_ids"):
            # ids 0..2 are special (pad/bos/eos) in several tokenizers: draw ordinary tokens
            out.append(Inp(n, [1, seq], "int64", "int", low=3, high=vocab))
        elif n in ("attention_mask", "encoder_attention_mask"):
            out.append(Inp(n, [1, seq], "int64", "ones"))
        elif n == "token_type_ids":
            out.append(Inp(n, [1, seq], "int64", "int", low=0, high=2))
        else:
            raise ValueError(n)
    return out


class Spec:
    def __init__(self, name, source, category, exporter, opset, inputs, outputs, build, notes=""):
        self.name, self.source, self.category = name, source, category
        self.exporter, self.opset, self.inputs, self.outputs = exporter, opset, inputs, outputs
        self.build, self.notes = build, notes


REGISTRY = []


def model(name, source, category, exporter, opset, inputs, outputs=("output",), notes=""):
    assert exporter in ("torchscript", "dynamo", "tf2onnx"), exporter

    def deco(fn):
        assert all(s.name != name for s in REGISTRY), name
        REGISTRY.append(Spec(name, source, category, exporter, opset, inputs, list(outputs) if outputs else None,
                             fn, notes))
        return fn
    return deco


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------
# Torch helpers
# --------------------------------------------------------------------------------------------

def _torch():
    import torch
    return torch


def randomize_norms(module, seed):
    """Gives every BatchNorm/GroupNorm/LayerNorm non-trivial statistics and affine parameters,
    so a compiler that folds or drops a normalisation wrongly shows a mismatch (fresh init has
    mean 0, var 1, gamma 1, beta 0, which hides such bugs)."""
    torch = _torch()
    nn = torch.nn
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
                if m.running_mean is not None:
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm, nn.LayerNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=g))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            elif type(m).__name__ == "FrozenBatchNorm2d":
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
    return module


def with_softmax(net):
    torch = _torch()

    class WithSoftmax(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return torch.softmax(self.net(x), dim=1)
    return WithSoftmax(net)


def hf_wrap(m, in_names, out_fields, **fixed):
    """Wraps a transformers model: positional tensors in, a tuple of chosen output fields out."""
    torch = _torch()

    class HF(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            kw = dict(zip(in_names, args))
            kw.update(fixed)
            o = self.m(**kw, return_dict=True)
            return tuple(getattr(o, f) for f in out_fields)
    return HF(m)


def hf_eager(cfg):
    cfg._attn_implementation = "eager"
    return cfg


def tv():
    import torchvision.models as tvm
    return tvm


def timm_create(name, **kw):
    import timm
    return timm.create_model(name, pretrained=False, **kw)


# ============================================================================================
# Classification CNNs, TorchScript exporter, old opsets (as old model zoos ship them)
# ============================================================================================

@model("resnet18_op9", "torchvision.models.resnet18", "classification", "torchscript", 9, image([1, 3, 224, 224]),
       notes="Softmax appended")
def _():
    return with_softmax(tv().resnet18(weights=None))


@model("squeezenet1_1_op9", "torchvision.models.squeezenet1_1", "classification", "torchscript", 9,
       image([1, 3, 224, 224]), notes="Softmax appended")
def _():
    return with_softmax(tv().squeezenet1_1(weights=None))


@model("mnasnet0_5_op9", "torchvision.models.mnasnet0_5", "classification", "torchscript", 9,
       image([1, 3, 224, 224]), notes="Softmax appended")
def _():
    return with_softmax(tv().mnasnet0_5(weights=None))


@model("vgg11_bn_op9", "torchvision.models.vgg11_bn (classifier shrunk)", "classification", "torchscript", 9,
       image([1, 3, 224, 224]),
       notes="classifier 25088-4096-4096-1000 replaced by 25088-256-256-1000 to stay under 100 MB; Softmax appended")
def _():
    torch = _torch()
    nn = torch.nn
    m = tv().vgg11_bn(weights=None)
    m.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 256), nn.ReLU(True), nn.Dropout(),
                                 nn.Linear(256, 256), nn.ReLU(True), nn.Dropout(), nn.Linear(256, 1000))
    return with_softmax(m)


@model("googlenet_op10", "torchvision.models.googlenet", "classification", "torchscript", 10,
       image([1, 3, 224, 224]), notes="aux_logits=False; Softmax appended")
def _():
    return with_softmax(tv().googlenet(weights=None, aux_logits=False, init_weights=True))


@model("mobilenet_v2_op10", "torchvision.models.mobilenet_v2", "classification", "torchscript", 10,
       image([1, 3, 224, 224]), notes="Softmax appended")
def _():
    return with_softmax(tv().mobilenet_v2(weights=None))


@model("densenet121_op11", "torchvision.models.densenet121", "classification", "torchscript", 11,
       image([1, 3, 224, 224]))
def _():
    return tv().densenet121(weights=None)


@model("shufflenet_v2_x1_0_op11", "torchvision.models.shufflenet_v2_x1_0", "classification", "torchscript", 11,
       image([1, 3, 224, 224]))
def _():
    return tv().shufflenet_v2_x1_0(weights=None)


@model("mobilenet_v3_small_op12", "torchvision.models.mobilenet_v3_small", "classification", "torchscript", 12,
       image([1, 3, 224, 224]))
def _():
    return tv().mobilenet_v3_small(weights=None)


@model("efficientnet_b0_tv_op13", "torchvision.models.efficientnet_b0", "classification", "torchscript", 13,
       image([1, 3, 224, 224]))
def _():
    return tv().efficientnet_b0(weights=None)


@model("regnet_y_400mf_op13", "torchvision.models.regnet_y_400mf", "classification", "torchscript", 13,
       image([1, 3, 224, 224]))
def _():
    return tv().regnet_y_400mf(weights=None)


@model("timm_mobilenetv3_large_100_op14", "timm:mobilenetv3_large_100", "classification", "torchscript", 14,
       image([1, 3, 224, 224]))
def _():
    return timm_create("mobilenetv3_large_100")


@model("timm_ghostnet_100_op13", "timm:ghostnet_100", "classification", "torchscript", 13,
       image([1, 3, 224, 224]))
def _():
    return timm_create("ghostnet_100")


@model("timm_regnetx_002_op11", "timm:regnetx_002", "classification", "torchscript", 11, image([1, 3, 224, 224]))
def _():
    return timm_create("regnetx_002")


@model("timm_rexnet_100_op17", "timm:rexnet_100", "classification", "torchscript", 17, image([1, 3, 224, 224]))
def _():
    return timm_create("rexnet_100")


@model("timm_dla34_op17", "timm:dla34", "classification", "torchscript", 17, image([1, 3, 160, 160]))
def _():
    return timm_create("dla34")


@model("timm_vit_tiny_patch16_224_op17", "timm:vit_tiny_patch16_224", "vision-transformer", "torchscript", 17,
       image([1, 3, 224, 224]))
def _():
    return timm_create("vit_tiny_patch16_224")


# ============================================================================================
# Classification, dynamo exporter (opset 18+)
# ============================================================================================

@model("timm_efficientnet_b0_op18", "timm:efficientnet_b0", "classification", "dynamo", 18, image([1, 3, 224, 224]))
def _():
    return timm_create("efficientnet_b0")


@model("timm_convnext_atto_op18", "timm:convnext_atto", "classification", "dynamo", 18, image([1, 3, 224, 224]))
def _():
    return timm_create("convnext_atto")


@model("timm_mobilevit_xxs_op18", "timm:mobilevit_xxs", "classification", "dynamo", 18, image([1, 3, 256, 256]))
def _():
    return timm_create("mobilevit_xxs")


@model("timm_deit_tiny_patch16_224_op18", "timm:deit_tiny_patch16_224", "vision-transformer", "dynamo", 18,
       image([1, 3, 224, 224]))
def _():
    return timm_create("deit_tiny_patch16_224")


@model("timm_levit_128s_op18", "timm:levit_128s", "vision-transformer", "dynamo", 18, image([1, 3, 224, 224]))
def _():
    return timm_create("levit_128s")


@model("timm_resnest14d_op19", "timm:resnest14d", "classification", "dynamo", 19, image([1, 3, 224, 224]))
def _():
    return timm_create("resnest14d")


@model("timm_hrnet_w18_small_op19", "timm:hrnet_w18_small", "classification", "dynamo", 19,
       image([1, 3, 224, 224]))
def _():
    return timm_create("hrnet_w18_small")


@model("timm_poolformer_s12_op20", "timm:poolformer_s12", "classification", "dynamo", 20, image([1, 3, 224, 224]))
def _():
    return timm_create("poolformer_s12")


@model("timm_edgenext_xx_small_op20", "timm:edgenext_xx_small", "classification", "dynamo", 20,
       image([1, 3, 256, 256]))
def _():
    return timm_create("edgenext_xx_small")


@model("timm_lcnet_050_op21", "timm:lcnet_050", "classification", "dynamo", 21, image([1, 3, 224, 224]))
def _():
    return timm_create("lcnet_050")


@model("timm_mixnet_s_op21", "timm:mixnet_s", "classification", "dynamo", 21, image([1, 3, 224, 224]))
def _():
    return timm_create("mixnet_s")


@model("timm_fastvit_t8_op18", "timm:fastvit_t8", "classification", "dynamo", 18, image([1, 3, 256, 256]))
def _():
    return timm_create("fastvit_t8")


@model("timm_repvgg_a0_op18", "timm:repvgg_a0", "classification", "dynamo", 18, image([1, 3, 224, 224]))
def _():
    return timm_create("repvgg_a0")


@model("timm_mobileone_s0_op17", "timm:mobileone_s0", "classification", "torchscript", 17,
       image([1, 3, 224, 224]), notes="training form: four 3x3 branches, a 1x1 and an identity per block")
def _():
    return timm_create("mobileone_s0")


@model("timm_xception41_op17", "timm:xception41", "classification", "torchscript", 17, image([1, 3, 299, 299]),
       notes="728 -> 728 1x1 convs on 19x19")
def _():
    return timm_create("xception41")


@model("inception_v3_op18", "torchvision.models.inception_v3", "classification", "dynamo", 18,
       image([1, 3, 299, 299]), notes="aux_logits=False")
def _():
    return tv().inception_v3(weights=None, aux_logits=False, init_weights=True)


@model("mobilenet_v3_large_op20", "torchvision.models.mobilenet_v3_large", "classification", "dynamo", 20,
       image([1, 3, 224, 224]))
def _():
    return tv().mobilenet_v3_large(weights=None)


@model("squeezenet1_0_op22", "torchvision.models.squeezenet1_0", "classification", "dynamo", 22,
       image([1, 3, 224, 224]), notes="Softmax appended")
def _():
    return with_softmax(tv().squeezenet1_0(weights=None))


# ============================================================================================
# Detection: backbones + FPN + heads, forward without anchors/post-processing
# ============================================================================================

def _det_wrap(det, outs):
    torch = _torch()

    class DetForward(torch.nn.Module):
        """backbone (+FPN) then the head; raw head tensors out (no anchors, no NMS)."""

        def __init__(self, det):
            super().__init__()
            self.backbone, self.head = det.backbone, det.head

        def forward(self, x):
            feats = list(self.backbone(x).values())
            o = self.head(feats)
            return tuple(o[k] for k in outs)
    return DetForward(det)


def _resnet18_fpn():
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7
    return resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5,
                               returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))


@model("retinanet_resnet18_fpn_op11", "torchvision.models.detection.RetinaNet(resnet18 FPN backbone)", "detection",
       "torchscript", 11, image([1, 3, 256, 256]), outputs=("cls_logits", "bbox_regression"),
       notes="backbone+FPN(P3-P7)+RetinaNetHead forward; anchors and post-processing left out")
def _():
    from torchvision.models.detection import RetinaNet
    return _det_wrap(RetinaNet(_resnet18_fpn(), num_classes=91), ["cls_logits", "bbox_regression"])


@model("fcos_resnet18_fpn_op18", "torchvision.models.detection.FCOS(resnet18 FPN backbone)", "detection",
       "dynamo", 18, image([1, 3, 256, 256]), outputs=("cls_logits", "bbox_regression", "bbox_ctrness"),
       notes="backbone+FPN(P3-P7)+FCOSHead forward; anchors and post-processing left out")
def _():
    from torchvision.models.detection import FCOS
    return _det_wrap(FCOS(_resnet18_fpn(), num_classes=91), ["cls_logits", "bbox_regression", "bbox_ctrness"])


@model("ssdlite320_mobilenet_v3_large_op13", "torchvision.models.detection.ssdlite320_mobilenet_v3_large",
       "detection", "torchscript", 13, image([1, 3, 320, 320]), outputs=("bbox_regression", "cls_logits"),
       notes="backbone+SSDLite head forward; anchors and post-processing left out")
def _():
    det = tv().detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    return _det_wrap(det, ["bbox_regression", "cls_logits"])


@model("yolo_cs3darknet_s_op12", "timm:cs3darknet_s (features_only) + YOLOv3-style heads", "detection",
       "torchscript", 12, image([1, 3, 256, 256]), outputs=("p3", "p4", "p5"),
       notes="timm CSP-Darknet backbone, three 1x1 YOLO heads (3 anchors x (5+80)) with sigmoid; no decoding/NMS")
def _():
    torch = _torch()
    nn = torch.nn

    class Yolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = timm_create("cs3darknet_s", features_only=True, out_indices=(2, 3, 4))
            chs = self.backbone.feature_info.channels()
            self.heads = nn.ModuleList([nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c),
                                                      nn.SiLU(), nn.Conv2d(c, 3 * 85, 1)) for c in chs])

        def forward(self, x):
            outs = []
            for f, h in zip(self.backbone(x), self.heads):
                y = h(f)
                b, _, hh, ww = y.shape
                outs.append(torch.sigmoid(y.view(b, 3, 85, hh, ww).permute(0, 1, 3, 4, 2)))
            return tuple(outs)
    return Yolo()


# ============================================================================================
# Segmentation
# ============================================================================================

def _seg_wrap(m):
    torch = _torch()

    class Seg(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]
    return Seg(m)


@model("deeplabv3_mobilenet_v3_large_op11", "torchvision.models.segmentation.deeplabv3_mobilenet_v3_large",
       "segmentation", "torchscript", 11, image([1, 3, 256, 256]))
def _():
    return _seg_wrap(tv().segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                     num_classes=21, aux_loss=False))


@model("lraspp_mobilenet_v3_large_op12", "torchvision.models.segmentation.lraspp_mobilenet_v3_large",
       "segmentation", "torchscript", 12, image([1, 3, 256, 256]))
def _():
    return _seg_wrap(tv().segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                  num_classes=21))


@model("segformer_mit_b0_op18", "transformers:SegformerForSemanticSegmentation(config mit-b0)", "segmentation",
       "dynamo", 18, [Inp("pixel_values", [1, 3, 128, 128])], outputs=("logits",),
       notes="SegformerConfig defaults (MiT-b0: hidden 32/64/160/256, depths 2x4), 19 labels")
def _():
    from transformers import SegformerConfig, SegformerForSemanticSegmentation
    cfg = hf_eager(SegformerConfig(num_labels=19))
    return hf_wrap(SegformerForSemanticSegmentation(cfg), ["pixel_values"], ["logits"])


# ============================================================================================
# Text recognition (CNN + RNN + CTC head)
# ============================================================================================

def _crnn(nclass=37, nh=256):
    """CRNN (Shi, Bai & Yao 2015, 'An End-to-End Trainable Neural Network for Image-based Sequence
    Recognition'), laid out as in the widely used crnn.pytorch: 7 convs, 2 BiLSTMs, linear CTC head."""
    torch = _torch()
    nn = torch.nn

    class BiLSTM(nn.Module):
        def __init__(self, nin, nh, nout):
            super().__init__()
            self.rnn = nn.LSTM(nin, nh, bidirectional=True)
            self.embedding = nn.Linear(nh * 2, nout)

        def forward(self, x):
            rec, _ = self.rnn(x)
            t, b, h = rec.shape
            return self.embedding(rec.view(t * b, h)).view(t, b, -1)

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            ks, ps, ss, nm = [3, 3, 3, 3, 3, 3, 2], [1, 1, 1, 1, 1, 1, 0], [1] * 7, [64, 128, 256, 256, 512, 512, 512]
            cnn = nn.Sequential()

            def conv(i, bn=False):
                nin = 1 if i == 0 else nm[i - 1]
                cnn.add_module(f"conv{i}", nn.Conv2d(nin, nm[i], ks[i], ss[i], ps[i]))
                if bn:
                    cnn.add_module(f"bn{i}", nn.BatchNorm2d(nm[i]))
                cnn.add_module(f"relu{i}", nn.ReLU(True))
            conv(0); cnn.add_module("pool0", nn.MaxPool2d(2, 2))
            conv(1); cnn.add_module("pool1", nn.MaxPool2d(2, 2))
            conv(2, True); conv(3); cnn.add_module("pool2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
            conv(4, True); conv(5); cnn.add_module("pool3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
            conv(6, True)
            self.cnn = cnn
            self.rnn = nn.Sequential(BiLSTM(512, nh, nh), BiLSTM(nh, nh, nclass))

        def forward(self, x):
            conv = self.cnn(x)
            conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
            return torch.log_softmax(self.rnn(conv), dim=2)
    return CRNN()


@model("crnn_op11", "CRNN (Shi et al. 2015) as in crnn.pytorch", "text-recognition", "torchscript", 11,
       image([1, 1, 32, 128]), outputs=("log_probs",),
       notes="VGG-style conv stack -> 2 x bidirectional nn.LSTM -> Linear -> LogSoftmax (T, N, 37) for CTC")
def _():
    return _crnn()


@model("crnn_op18", "CRNN (Shi et al. 2015) as in crnn.pytorch", "text-recognition", "dynamo", 18,
       image([1, 1, 32, 128]), outputs=("log_probs",),
       notes="same architecture as crnn_op11, dynamo exporter")
def _():
    return _crnn()


# ============================================================================================
# Speech
# ============================================================================================

@model("deepspeech_op11", "torchaudio.models.DeepSpeech (re-implemented verbatim)", "speech", "torchscript", 11,
       [Inp("features", [1, 1, 100, 80])], outputs=("log_probs",),
       notes="torchaudio is not installable for torch 2.15; the 40-line model is copied: 3 FC+ReLU(clamped) -> "
             "bidirectional nn.RNN(relu) -> 2 FC -> log_softmax; n_feature=80, n_hidden=256, n_class=29")
def _():
    torch = _torch()
    nn = torch.nn

    class FullyConnected(nn.Module):
        def __init__(self, n_feature, n_hidden, dropout, relu_max_clip=20):
            super().__init__()
            self.fc = nn.Linear(n_feature, n_hidden, bias=True)
            self.relu_max_clip, self.dropout = relu_max_clip, dropout

        def forward(self, x):
            x = self.fc(x)
            x = nn.functional.relu(x)
            x = nn.functional.hardtanh(x, 0, self.relu_max_clip)
            return nn.functional.dropout(x, self.dropout, self.training)

    class DeepSpeech(nn.Module):
        def __init__(self, n_feature, n_hidden=2048, n_class=40, dropout=0.0):
            super().__init__()
            self.n_hidden = n_hidden
            self.fc1 = FullyConnected(n_feature, n_hidden, dropout)
            self.fc2 = FullyConnected(n_hidden, n_hidden, dropout)
            self.fc3 = FullyConnected(n_hidden, n_hidden, dropout)
            self.bi_rnn = nn.RNN(n_hidden, n_hidden, num_layers=1, nonlinearity="relu", bidirectional=True)
            self.fc4 = FullyConnected(n_hidden, n_hidden, dropout)
            self.out = nn.Linear(n_hidden, n_class)

        def forward(self, x):
            x = self.fc1(x)
            x = self.fc2(x)
            x = self.fc3(x)
            x = x.squeeze(1)
            x = x.transpose(0, 1)
            x, _ = self.bi_rnn(x)
            x = x[:, :, : self.n_hidden] + x[:, :, self.n_hidden:]
            x = self.fc4(x)
            x = self.out(x)
            x = x.permute(1, 0, 2)
            return nn.functional.log_softmax(x, dim=2)
    return DeepSpeech(80, 256, 29)


@model("deepspeech2_gru_op14", "DeepSpeech2 (Amodei et al. 2016): 2D conv front end + bidirectional nn.GRU",
       "speech", "torchscript", 14, [Inp("spectrogram", [1, 1, 161, 200])], outputs=("log_probs",),
       notes="small re-implementation: 2 Conv2d+BN+Hardtanh(0,20), 3 bidirectional GRU layers (hidden 256), "
             "Linear CTC head over 29 symbols")
def _():
    torch = _torch()
    nn = torch.nn

    class DS2(nn.Module):
        def __init__(self, n_freq=161, hidden=256, layers=3, n_class=29):
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(1, 32, (41, 11), (2, 2), (20, 5)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20, True),
                nn.Conv2d(32, 32, (21, 11), (2, 1), (10, 5)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20, True))
            f = (n_freq + 2 * 20 - 41) // 2 + 1
            f = (f + 2 * 10 - 21) // 2 + 1
            self.rnn = nn.GRU(32 * f, hidden, num_layers=layers, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(2 * hidden, n_class)

        def forward(self, x):
            x = self.conv(x)  # b, c, f, t
            b, c, f, t = x.shape
            x = x.view(b, c * f, t).transpose(1, 2)
            x, _ = self.rnn(x)
            return torch.log_softmax(self.fc(x), dim=-1)
    return DS2()


@model("wav2vec2_op18", "transformers:Wav2Vec2Model(config)", "speech", "dynamo", 18,
       [Inp("input_values", [1, 16000])], outputs=("last_hidden_state",),
       notes="hidden 128, 2 layers, 4 heads, ffn 256, conv feature extractor 7 x 128 ch, group norm; 1 s audio")
def _():
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    cfg = hf_eager(Wav2Vec2Config(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                                  conv_dim=(128,) * 7, num_conv_pos_embeddings=32, num_conv_pos_embedding_groups=4,
                                  vocab_size=32, do_stable_layer_norm=False, feat_extract_norm="group",
                                  mask_time_prob=0.0))
    return hf_wrap(Wav2Vec2Model(cfg), ["input_values"], ["last_hidden_state"])


@model("whisper_encoder_op17", "transformers:WhisperModel(config).encoder", "speech", "torchscript", 17,
       [Inp("input_features", [1, 80, 300])], outputs=("last_hidden_state",),
       notes="d_model 128, 2 encoder layers, 4 heads, ffn 256, 80 mel bins, 300 frames (max_source_positions 150)")
def _():
    from transformers import WhisperConfig, WhisperModel
    cfg = hf_eager(WhisperConfig(vocab_size=1000, d_model=128, encoder_layers=2, decoder_layers=2,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                                 decoder_ffn_dim=256, num_mel_bins=80, max_source_positions=150,
                                 max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                 decoder_start_token_id=1))
    return hf_wrap(WhisperModel(cfg).get_encoder(), ["input_features"], ["last_hidden_state"])


@model("whisper_decoder_op18", "transformers:WhisperModel(config).decoder", "speech", "dynamo", 18,
       [Inp("decoder_input_ids", [1, 16], "int64", "int", low=3, high=1000),
        Inp("encoder_hidden_states", [1, 150, 128])], outputs=("last_hidden_state",),
       notes="decoder half of whisper_encoder_op17's config; use_cache=False")
def _():
    from transformers import WhisperConfig, WhisperModel
    cfg = hf_eager(WhisperConfig(vocab_size=1000, d_model=128, encoder_layers=2, decoder_layers=2,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                                 decoder_ffn_dim=256, num_mel_bins=80, max_source_positions=150,
                                 max_target_positions=64, use_cache=False, pad_token_id=0, bos_token_id=1,
                                 eos_token_id=2, decoder_start_token_id=1))
    return hf_wrap(WhisperModel(cfg).get_decoder(), ["input_ids", "encoder_hidden_states"], ["last_hidden_state"],
                   use_cache=False)


# ============================================================================================
# Transformer encoders
# ============================================================================================

@model("bert_op14", "transformers:BertModel(config)", "transformer-encoder", "torchscript", 14,
       tokens(1000, 32, ("input_ids", "attention_mask", "token_type_ids")),
       outputs=("last_hidden_state", "pooler_output"),
       notes="vocab 1000, hidden 128, 2 layers, 4 heads, ffn 512, seq 32")
def _():
    from transformers import BertConfig, BertModel
    cfg = hf_eager(BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=512, max_position_embeddings=64))
    return hf_wrap(BertModel(cfg), ["input_ids", "attention_mask", "token_type_ids"],
                   ["last_hidden_state", "pooler_output"])


@model("distilbert_op13", "transformers:DistilBertModel(config)", "transformer-encoder", "torchscript", 13,
       tokens(1000, 32), outputs=("last_hidden_state",),
       notes="vocab 1000, dim 128, 2 layers, 4 heads, hidden_dim 512, seq 32")
def _():
    from transformers import DistilBertConfig, DistilBertModel
    cfg = hf_eager(DistilBertConfig(vocab_size=1000, dim=128, n_layers=2, n_heads=4, hidden_dim=512,
                                    max_position_embeddings=64))
    return hf_wrap(DistilBertModel(cfg), ["input_ids", "attention_mask"], ["last_hidden_state"])


@model("electra_op17", "transformers:ElectraModel(config)", "transformer-encoder", "torchscript", 17,
       tokens(1000, 32, ("input_ids", "attention_mask", "token_type_ids")), outputs=("last_hidden_state",),
       notes="vocab 1000, embedding 64 projected to hidden 128, 2 layers, 4 heads, seq 32")
def _():
    from transformers import ElectraConfig, ElectraModel
    cfg = hf_eager(ElectraConfig(vocab_size=1000, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=256, max_position_embeddings=64))
    return hf_wrap(ElectraModel(cfg), ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state"])


@model("roberta_op18", "transformers:RobertaModel(config)", "transformer-encoder", "dynamo", 18, tokens(1000, 32),
       outputs=("last_hidden_state", "pooler_output"),
       notes="vocab 1000, hidden 128, 2 layers, 4 heads, ffn 512, seq 32")
def _():
    from transformers import RobertaConfig, RobertaModel
    cfg = hf_eager(RobertaConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=512, max_position_embeddings=66))
    return hf_wrap(RobertaModel(cfg), ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"])


@model("albert_op20", "transformers:AlbertModel(config)", "transformer-encoder", "dynamo", 20,
       tokens(1000, 32, ("input_ids", "attention_mask", "token_type_ids")),
       outputs=("last_hidden_state", "pooler_output"),
       notes="vocab 1000, embedding 64, hidden 128, 2 layers (shared), 4 heads, seq 32")
def _():
    from transformers import AlbertConfig, AlbertModel
    cfg = hf_eager(AlbertConfig(vocab_size=1000, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=256, max_position_embeddings=64))
    return hf_wrap(AlbertModel(cfg), ["input_ids", "attention_mask", "token_type_ids"],
                   ["last_hidden_state", "pooler_output"])


@model("vit_op12", "transformers:ViTModel(config)", "vision-transformer", "torchscript", 12,
       [Inp("pixel_values", [1, 3, 64, 64])], outputs=("last_hidden_state", "pooler_output"),
       notes="image 64, patch 8, hidden 128, 2 layers, 4 heads, ffn 256")
def _():
    from transformers import ViTConfig, ViTModel
    cfg = hf_eager(ViTConfig(image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=256))
    return hf_wrap(ViTModel(cfg), ["pixel_values"], ["last_hidden_state", "pooler_output"])


@model("deit_op18", "transformers:DeiTModel(config)", "vision-transformer", "dynamo", 18,
       [Inp("pixel_values", [1, 3, 64, 64])], outputs=("last_hidden_state",),
       notes="image 64, patch 8, hidden 128, 2 layers, 4 heads, ffn 256; cls + distillation tokens")
def _():
    from transformers import DeiTConfig, DeiTModel
    cfg = hf_eager(DeiTConfig(image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=256))
    return hf_wrap(DeiTModel(cfg, add_pooling_layer=False), ["pixel_values"], ["last_hidden_state"])


@model("swin_op18", "transformers:SwinModel(config)", "vision-transformer", "dynamo", 18,
       [Inp("pixel_values", [1, 3, 64, 64])], outputs=("last_hidden_state", "pooler_output"),
       notes="image 64, patch 4, embed 48, depths (2, 2), heads (3, 6), window 4 (shifted windows)")
def _():
    from transformers import SwinConfig, SwinModel
    cfg = hf_eager(SwinConfig(image_size=64, patch_size=4, embed_dim=48, depths=[2, 2], num_heads=[3, 6],
                              window_size=4))
    return hf_wrap(SwinModel(cfg), ["pixel_values"], ["last_hidden_state", "pooler_output"])


@model("swin_op14", "transformers:SwinModel(config)", "vision-transformer", "torchscript", 14,
       [Inp("pixel_values", [1, 3, 64, 64])], outputs=("last_hidden_state", "pooler_output"),
       notes="same config as swin_op18, TorchScript exporter")
def _():
    from transformers import SwinConfig, SwinModel
    cfg = hf_eager(SwinConfig(image_size=64, patch_size=4, embed_dim=48, depths=[2, 2], num_heads=[3, 6],
                              window_size=4))
    return hf_wrap(SwinModel(cfg), ["pixel_values"], ["last_hidden_state", "pooler_output"])


def _t5_cfg():
    from transformers import T5Config
    return hf_eager(T5Config(vocab_size=1000, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_decoder_layers=2,
                             num_heads=4, use_cache=False))


@model("t5_encoder_op18", "transformers:T5EncoderModel(config)", "transformer-encoder", "dynamo", 18,
       tokens(1000, 32), outputs=("last_hidden_state",),
       notes="vocab 1000, d_model 128, 2 layers, 4 heads, ffn 256, relative position buckets")
def _():
    from transformers import T5EncoderModel
    return hf_wrap(T5EncoderModel(_t5_cfg()), ["input_ids", "attention_mask"], ["last_hidden_state"])


def _bart():
    from transformers import BartConfig, BartModel
    cfg = hf_eager(BartConfig(vocab_size=1000, d_model=128, encoder_layers=2, decoder_layers=2,
                              encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                              decoder_ffn_dim=256, max_position_embeddings=64, use_cache=False))
    return BartModel(cfg)


@model("bart_encoder_op14", "transformers:BartModel(config).encoder", "transformer-encoder", "torchscript", 14,
       tokens(1000, 32), outputs=("last_hidden_state",),
       notes="vocab 1000, d_model 128, 2 layers, 4 heads, ffn 256, seq 32")
def _():
    return hf_wrap(_bart().get_encoder(), ["input_ids", "attention_mask"], ["last_hidden_state"])


# ============================================================================================
# Transformer decoders (no KV cache)
# ============================================================================================

def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = hf_eager(GPT2Config(vocab_size=1000, n_positions=64, n_embd=128, n_layer=2, n_head=4, use_cache=False))
    return GPT2LMHeadModel(cfg)


@model("gpt2_op14", "transformers:GPT2LMHeadModel(config)", "transformer-decoder", "torchscript", 14,
       [Inp("input_ids", [1, 32], "int64", "int", low=0, high=1000), Inp("attention_mask", [1, 32], "int64", "ones")],
       outputs=("logits",),
       notes="vocab 1000, n_embd 128, 2 layers, 4 heads, seq 32, use_cache=False (causal mask, tied LM head); "
             "attention_mask is an input because without it transformers' packed-sequence check uses aten::diff, "
             "which the TorchScript exporter cannot export")
def _():
    return hf_wrap(_gpt2(), ["input_ids", "attention_mask"], ["logits"], use_cache=False)


@model("gpt2_op18", "transformers:GPT2LMHeadModel(config)", "transformer-decoder", "dynamo", 18,
       [Inp("input_ids", [1, 32], "int64", "int", low=0, high=1000)], outputs=("logits",),
       notes="same config as gpt2_op14, dynamo exporter")
def _():
    return hf_wrap(_gpt2(), ["input_ids"], ["logits"], use_cache=False)


@model("t5_decoder_op13", "transformers:T5Model(config).decoder", "transformer-decoder", "torchscript", 13,
       [Inp("decoder_input_ids", [1, 16], "int64", "int", low=3, high=1000),
        Inp("encoder_hidden_states", [1, 32, 128]),
        Inp("encoder_attention_mask", [1, 32], "int64", "ones")], outputs=("last_hidden_state",),
       notes="decoder stack of the t5_encoder_op18 config: causal self-attention + cross-attention")
def _():
    from transformers import T5Model
    return hf_wrap(T5Model(_t5_cfg()).get_decoder(), ["input_ids", "encoder_hidden_states", "encoder_attention_mask"],
                   ["last_hidden_state"], use_cache=False)


@model("bart_decoder_op20", "transformers:BartModel(config).decoder", "transformer-decoder", "dynamo", 20,
       [Inp("decoder_input_ids", [1, 16], "int64", "int", low=3, high=1000),
        Inp("encoder_hidden_states", [1, 32, 128]),
        Inp("encoder_attention_mask", [1, 32], "int64", "ones")], outputs=("last_hidden_state",),
       notes="decoder half of bart_encoder_op14's config; use_cache=False")
def _():
    return hf_wrap(_bart().get_decoder(), ["input_ids", "encoder_hidden_states", "encoder_attention_mask"],
                   ["last_hidden_state"], use_cache=False)


# ============================================================================================
# Keras applications and Keras-example architectures, exported with tf2onnx
# ============================================================================================

def _keras():
    import keras
    return keras


def _tf_keras():
    """Keras 2 (the tf_keras package): its LSTM/GRU layers are what tf2onnx rewrites into ONNX LSTM/GRU
    nodes; Keras 3 RNNs come out as Loop subgraphs."""
    import tf_keras
    return tf_keras


@model("keras_mobilenet_op13", "keras.applications.MobileNet", "classification", "tf2onnx", 13,
       image([1, 128, 128, 3]), outputs=None, notes="alpha 0.5, 128x128 NHWC")
def _():
    return _keras().applications.MobileNet(weights=None, input_shape=(128, 128, 3), alpha=0.5)


@model("keras_mobilenetv2_op13", "keras.applications.MobileNetV2", "classification", "tf2onnx", 13,
       image([1, 160, 160, 3]), outputs=None, notes="alpha 0.75, 160x160 NHWC")
def _():
    return _keras().applications.MobileNetV2(weights=None, input_shape=(160, 160, 3), alpha=0.75)


@model("keras_mobilenetv3small_op15", "keras.applications.MobileNetV3Small", "classification", "tf2onnx", 15,
       image([1, 224, 224, 3]), outputs=None, notes="includes the Rescaling preprocessing layer")
def _():
    return _keras().applications.MobileNetV3Small(weights=None, input_shape=(224, 224, 3))


@model("keras_efficientnetb0_op13", "keras.applications.EfficientNetB0", "classification", "tf2onnx", 13,
       image([1, 224, 224, 3], ), outputs=None, notes="includes Rescaling+Normalization preprocessing")
def _():
    return _keras().applications.EfficientNetB0(weights=None, input_shape=(224, 224, 3))


@model("keras_efficientnetv2b0_op17", "keras.applications.EfficientNetV2B0", "classification", "tf2onnx", 17,
       image([1, 224, 224, 3]), outputs=None)
def _():
    return _keras().applications.EfficientNetV2B0(weights=None, input_shape=(224, 224, 3))


@model("tfkeras_mobilenetv3large_op13", "tf_keras.applications.MobileNetV3Large (Keras 2)", "classification",
       "tf2onnx", 13, image([1, 224, 224, 3]), outputs=None, notes="alpha 0.75; legacy Keras 2 graph")
def _():
    return _tf_keras().applications.MobileNetV3Large(weights=None, input_shape=(224, 224, 3), alpha=0.75)


@model("keras_resnet50_op13", "keras.applications.ResNet50", "classification", "tf2onnx", 13,
       image([1, 224, 224, 3]), outputs=None, notes="classes=10 to stay under 100 MB")
def _():
    return _keras().applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=10)


@model("keras_densenet121_op13", "keras.applications.DenseNet121", "classification", "tf2onnx", 13,
       image([1, 160, 160, 3]), outputs=None)
def _():
    return _keras().applications.DenseNet121(weights=None, input_shape=(160, 160, 3))


@model("keras_nasnetmobile_op13", "keras.applications.NASNetMobile", "classification", "tf2onnx", 13,
       image([1, 224, 224, 3]), outputs=None)
def _():
    return _keras().applications.NASNetMobile(weights=None, input_shape=(224, 224, 3))


@model("keras_xception_op15", "keras.applications.Xception", "classification", "tf2onnx", 15,
       image([1, 160, 160, 3]), outputs=None, notes="classes=10 to stay under 100 MB; 160x160 NHWC")
def _():
    return _keras().applications.Xception(weights=None, input_shape=(160, 160, 3), classes=10)


def _ocr_captcha(keras):
    L = keras.layers
    x_in = keras.Input((200, 50, 1), name="image", batch_size=1)
    x = L.Conv2D(32, 3, activation="relu", kernel_initializer="he_normal", padding="same", name="Conv1")(x_in)
    x = L.MaxPooling2D(2, name="pool1")(x)
    x = L.Conv2D(64, 3, activation="relu", kernel_initializer="he_normal", padding="same", name="Conv2")(x)
    x = L.MaxPooling2D(2, name="pool2")(x)
    x = L.Reshape((200 // 4, (50 // 4) * 64), name="reshape")(x)
    x = L.Dense(64, activation="relu", name="dense1")(x)
    x = L.Bidirectional(L.LSTM(128, return_sequences=True))(x)
    x = L.Bidirectional(L.GRU(64, return_sequences=True))(x)
    x = L.Dense(20, activation="softmax", name="dense2")(x)
    return keras.Model(x_in, x, name="ocr_model_v1")


@model("keras_crnn_ocr_op13", "Keras example 'OCR model for reading Captchas' (CNN + BiLSTM + BiGRU), tf_keras",
       "text-recognition", "tf2onnx", 13, image([1, 200, 50, 1], name="image"), outputs=None,
       notes="keras.io captcha OCR architecture (2 Conv2D+MaxPool, Dense, Bidirectional LSTM(128), "
             "Bidirectional GRU(64) instead of the 2nd LSTM, softmax over 20 symbols); CTC layer left out; "
             "built with tf_keras (Keras 2), so tf2onnx emits ONNX LSTM and GRU nodes")
def _():
    return _ocr_captcha(_tf_keras())


@model("keras3_crnn_ocr_op13", "Keras example 'OCR model for reading Captchas' (CNN + BiLSTM + BiGRU), Keras 3",
       "text-recognition", "tf2onnx", 13, image([1, 200, 50, 1], name="image"), outputs=None,
       notes="same architecture as keras_crnn_ocr_op13 built with Keras 3: tf2onnx cannot rewrite Keras 3 RNNs, "
             "so they come out as Loop + ReverseSequence")
def _():
    return _ocr_captcha(_keras())


@model("keras_deepspeech2_op13", "Keras example 'CTC-based ASR' DeepSpeech2 (Conv2D + BiGRU), tf_keras", "speech",
       "tf2onnx", 13, [Inp("spectrogram", [1, 200, 129])], outputs=None,
       notes="keras.io DeepSpeech2-like model shrunk: fft 129, 2 BiGRU layers of 128 units, 32 output symbols; "
             "built with tf_keras (Keras 2), so tf2onnx emits ONNX GRU nodes")
def _():
    keras = _tf_keras()
    L = keras.layers
    x_in = L.Input((200, 129), name="spectrogram", batch_size=1)
    x = L.Reshape((-1, 129, 1), name="expand_dim")(x_in)
    x = L.Conv2D(32, [11, 41], strides=[2, 2], padding="same", use_bias=False, name="conv_1")(x)
    x = L.BatchNormalization(name="conv_1_bn")(x)
    x = L.ReLU(name="conv_1_relu")(x)
    x = L.Conv2D(32, [11, 21], strides=[1, 2], padding="same", use_bias=False, name="conv_2")(x)
    x = L.BatchNormalization(name="conv_2_bn")(x)
    x = L.ReLU(name="conv_2_relu")(x)
    x = L.Reshape((-1, x.shape[-2] * x.shape[-1]))(x)
    for i in range(1, 3):
        x = L.Bidirectional(L.GRU(128, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                                  return_sequences=True, reset_after=True, name=f"gru_{i}"),
                            name=f"bidirectional_{i}", merge_mode="concat")(x)
    x = L.Dense(256, name="dense_1")(x)
    x = L.ReLU(name="dense_1_relu")(x)
    x = L.Dense(32, activation="softmax")(x)
    return keras.Model(x_in, x, name="DeepSpeech_2")


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------

def flatten(o):
    torch = _torch()
    if isinstance(o, torch.Tensor):
        return [o.detach().cpu().numpy()]
    if isinstance(o, (list, tuple)):
        return [a for x in o for a in flatten(x)]
    if isinstance(o, dict):
        return [a for x in o.values() for a in flatten(x)]
    if hasattr(o, "numpy"):
        return [np.asarray(o)]
    raise TypeError(type(o))


def strip_stack_traces(path):
    """The dynamo exporter records each node's Python stack trace (absolute paths and line numbers of
    this script and the venv) in metadata_props; drop that one key so the bytes do not depend on where
    the checkout and the venv live. Everything else the exporter wrote is kept."""
    import onnx
    mp = onnx.load(path)

    def walk(g):
        for n in g.node:
            keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            if len(keep) != len(n.metadata_props):
                del n.metadata_props[:]
                n.metadata_props.extend(keep)
            for attr in n.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(sub)
    walk(mp.graph)
    for f in mp.functions:
        walk(f)
    onnx.save(mp, path)


def export_torch(spec, arrays, path):
    torch = _torch()
    torch.manual_seed(seed_of(spec.name))
    np.random.seed(seed_of(spec.name))
    m = spec.build()
    randomize_norms(m, seed_of(spec.name) + 1)
    m.eval()
    args = tuple(torch.from_numpy(arrays[i.name]) for i in spec.inputs)
    names = [i.name for i in spec.inputs]
    with torch.no_grad():
        ref = flatten(m(*args))
        if spec.exporter == "torchscript":
            torch.onnx.export(m, args, path, opset_version=spec.opset, dynamo=False, input_names=names,
                              output_names=spec.outputs, do_constant_folding=True)
        else:
            torch.onnx.export(m, args, path, opset_version=spec.opset, dynamo=True, external_data=False,
                              input_names=names, output_names=spec.outputs, optimize=True)
            strip_stack_traces(path)
    params = sum(p.numel() for p in m.parameters())
    del m
    return ref, params


def randomize_keras_bn(model, seed):
    bn_types = (_keras().layers.BatchNormalization, _tf_keras().layers.BatchNormalization)
    rng = np.random.default_rng(seed)
    count = 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, bn_types):
            count += 1
            new = []
            for w, v in zip(layer.weights, layer.get_weights()):
                n = w.name.split("/")[-1]
                if "gamma" in n:
                    v = 1.0 + 0.1 * rng.standard_normal(v.shape)
                elif "beta" in n:
                    v = 0.1 * rng.standard_normal(v.shape)
                elif "moving_mean" in n:
                    v = 0.1 * rng.standard_normal(v.shape)
                elif "moving_variance" in n:
                    v = 0.5 + rng.random(v.shape)
                new.append(v.astype(np.float32))
            layer.set_weights(new)
    return count


def canonicalize_names(path):
    """Makes a tf2onnx export byte-reproducible. tf2onnx names the tensors it makes '<base>__<counter>'
    with counters that follow the (run-dependent) order TensorFlow hands out its graph, it merges duplicate
    constants and nodes under whichever name it met first, and independent branches come out in varying
    order. So (1) the nodes of every graph are put in a canonical topological order (ties broken by a
    structural hash of each node: op, attributes, and the hashes of its inputs, down to the initializers'
    bytes and the graph inputs), then (2) every internal name is replaced by one derived from its position:
    node k of a graph becomes '<OpType>_<k>' (its outputs '<OpType>_<k>:<j>'), initializers 'const_<r>' in
    order of first use, subgraphs nest as '<parent node>/<...>'. The model's own input and output names
    are kept; semantics are unchanged."""
    import heapq
    import onnx
    mp = onnx.load(path)
    keep = {v.name for v in mp.graph.input} | {v.name for v in mp.graph.output}
    vmap = {}

    def sha(*parts):
        h = hashlib.sha256()
        for p_ in parts:
            h.update(p_ if isinstance(p_, bytes) else str(p_).encode())
            h.update(b"\0")
        return h.hexdigest()

    def subgraphs(n):
        for attr in n.attribute:
            if attr.HasField("g"):
                yield attr.g
            yield from attr.graphs

    def free_inputs(g):
        made = {v.name for v in g.input} | {t.name for t in g.initializer}
        out = []
        for n in g.node:
            for sub in subgraphs(n):
                out += [x for x in free_inputs(sub) if x not in made]
            out += [x for x in n.input if x and x not in made]
            made.update(n.output)
        return out

    def order(g, outer):
        """Sorts g.node canonically; returns the structural signature of g."""
        keys = dict(outer)
        for i, v in enumerate(g.input):
            keys[v.name] = f"in:{v.name}" if v.name in keep else f"in:{i}"
        for t in g.initializer:
            c = onnx.TensorProto()
            c.CopyFrom(t)
            c.name = ""
            keys[t.name] = "c:" + sha(c.SerializeToString())
        producer = {o: i for i, n in enumerate(g.node) for o in n.output if o}
        deps = []
        for n in g.node:
            needed = list(n.input)
            for sub in subgraphs(n):
                needed += free_inputs(sub)  # a subgraph's outer-scope values are dependencies too
            deps.append({producer[x] for x in needed if x in producer})
        users = [[] for _ in g.node]
        for i, d in enumerate(deps):
            for j in d:
                users[j].append(i)

        def toposort(prio):
            left = [len(d) for d in deps]
            ready = [(prio[i], i) for i in range(len(g.node)) if not left[i]]
            heapq.heapify(ready)
            out = []
            while ready:
                _, i = heapq.heappop(ready)
                out.append(i)
                for u in users[i]:
                    left[u] -= 1
                    if not left[u]:
                        heapq.heappush(ready, (prio[u], u))
            if len(out) != len(g.node):
                raise RuntimeError("graph is not acyclic")
            return out

        # hash every node once all it reads (subgraphs' outer-scope reads included) has a hash; tf2onnx
        # does not always list a Loop after the values its body reads from the outer graph
        nkey = [None] * len(g.node)
        for i in toposort(list(range(len(g.node)))):
            n = g.node[i]
            if n.domain == "":
                n.ClearField("domain")
            attrs = []
            for attr in sorted(n.attribute, key=lambda a: a.name):
                if attr.HasField("g") or len(attr.graphs):
                    attrs.append((attr.name, [order(sg, keys) for sg in subgraphs(n)]))
                else:
                    attrs.append((attr.name, attr.SerializeToString().hex()))
            h = sha(n.op_type, n.domain, attrs, [keys.get(x, "?") for x in n.input])
            nkey[i] = h
            for j, o in enumerate(n.output):
                keys[o] = f"{h}:{j}"
        sorted_idx = toposort(nkey)
        nodes = [g.node[i] for i in sorted_idx]
        copies = []
        for n in nodes:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            copies.append(c)
        g.ClearField("node")
        g.node.extend(copies)
        return sha([nkey[i] for i in sorted_idx], [keys.get(v.name, "?") for v in g.output])

    order(mp.graph, {})

    def uses(g, out):
        for n in g.node:
            for x in n.input:
                out.setdefault(x, len(out))
            for sub in subgraphs(n):
                uses(sub, out)
        return out

    def assign(g, prefix):
        for i, v in enumerate(g.input):
            if v.name not in keep:
                vmap[v.name] = f"{prefix}input_{i}"
        first = uses(g, {})
        inits = sorted(g.initializer, key=lambda t: (first.get(t.name, len(first)), t.name))
        for r, t in enumerate(inits):
            if t.name not in keep:
                vmap[t.name] = f"{prefix}const_{r}"
        g.ClearField("initializer")
        g.initializer.extend(inits)
        for k, n in enumerate(g.node):
            base = f"{prefix}{n.op_type}_{k}"
            n.name = base
            for j, x in enumerate(n.output):
                if x and x not in keep:
                    vmap[x] = f"{base}:{j}"
            for sub in subgraphs(n):
                assign(sub, base + "/")

    def rename(g):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            v.name = vmap.get(v.name, v.name)
        for t in g.initializer:
            t.name = vmap.get(t.name, t.name)
        for n in g.node:
            for i, x in enumerate(n.input):
                n.input[i] = vmap.get(x, x)
            for i, x in enumerate(n.output):
                n.output[i] = vmap.get(x, x)
            for sub in subgraphs(n):
                rename(sub)

    assign(mp.graph, "")
    rename(mp.graph)
    onnx.save(mp, path)


def export_keras(spec, arrays, path):
    import tensorflow as tf
    import tf2onnx
    keras = _keras()
    keras.utils.set_random_seed(seed_of(spec.name))
    _tf_keras().utils.set_random_seed(seed_of(spec.name))
    m = spec.build()
    randomize_keras_bn(m, seed_of(spec.name) + 1)
    sig = [tf.TensorSpec(i.shape, getattr(tf, i.dtype), name=i.name) for i in spec.inputs]
    tf2onnx.convert.from_keras(m, input_signature=sig, opset=spec.opset, output_path=path)
    canonicalize_names(path)
    feed = [arrays[i.name] for i in spec.inputs]
    ref = m(feed[0] if len(feed) == 1 else feed, training=False)
    ref = [np.asarray(r) for r in (ref if isinstance(ref, (list, tuple)) else [ref])]
    params = int(m.count_params())
    del m
    keras.backend.clear_session()
    _tf_keras().backend.clear_session()
    return ref, params


DTYPES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


def describe_values(values):
    out = []
    for v in values:
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
        out.append({"name": v.name, "dtype": DTYPES.get(t.elem_type, str(t.elem_type)), "shape": dims})
    return out


def ort_run(path, arrays):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 2
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: arrays[i.name] for i in s.get_inputs()})


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def build_one(spec, out_dir, check):
    import onnx
    path = os.path.join(out_dir, spec.name + ".onnx")
    arrays = {i.name: i.make(spec.name) for i in spec.inputs}
    t0 = time.time()
    if spec.exporter == "tf2onnx":
        ref, params = export_keras(spec, arrays, path)
    else:
        ref, params = export_torch(spec, arrays, path)
    export_s = time.time() - t0
    if not os.path.exists(path):
        raise RuntimeError("exporter wrote no file")
    if os.path.exists(path + ".data") or any(f.startswith(spec.name + ".onnx.") for f in os.listdir(out_dir)):
        raise RuntimeError("exporter wrote external data; this corpus wants self-contained files")
    mp = onnx.load(path)
    onnx.checker.check_model(mp)
    ins = describe_values([v for v in mp.graph.input if v.name not in {i.name for i in mp.graph.initializer}])
    outs = describe_values(mp.graph.output)
    declared = {i.name for i in spec.inputs}
    if {i["name"] for i in ins} != declared:
        raise RuntimeError(f"graph inputs {[i['name'] for i in ins]} differ from the declared {sorted(declared)}")
    for i in ins + outs:
        if not all(isinstance(d, int) and d > 0 for d in i["shape"]):
            if i in ins:
                raise RuntimeError(f"input {i['name']} has a symbolic shape {i['shape']}")
    opset = next((o.version for o in mp.opset_import if o.domain in ("", "ai.onnx")), None)
    check_res = None
    if check:
        got = ort_run(path, arrays)
        errs = [rel_err(g, r) for g, r in zip(got, ref)] if len(got) == len(ref) else [float("inf")]
        check_res = {"ort_vs_framework_rel_err": max(errs) if errs else 0.0, "outputs_compared": len(errs)}
    inp_dir = os.path.join(out_dir, spec.name + ".inputs")
    os.makedirs(inp_dir, exist_ok=True)
    for f in os.listdir(inp_dir):
        os.remove(os.path.join(inp_dir, f))
    for i in spec.inputs:
        np.save(os.path.join(inp_dir, i.name + ".npy"), arrays[i.name])
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    meta = {
        "name": spec.name, "source": spec.source, "category": spec.category, "exporter": spec.exporter,
        "opset": opset, "requested_opset": spec.opset,
        "producer": f"{mp.producer_name} {mp.producer_version}".strip(),
        "inputs": [i.describe() for i in spec.inputs],
        "input_files": {i.name: f"{spec.name}.inputs/{i.name}.npy" for i in spec.inputs},
        "outputs": outs, "parameters": int(params), "nodes": len(mp.graph.node),
        "op_types": sorted({n.op_type for n in mp.graph.node}),
        "size_bytes": os.path.getsize(path), "sha256": digest, "seed": seed_of(spec.name),
        "weights": "random (fixed seed); normalisation layers given non-trivial statistics",
        "export_seconds": round(export_s, 2), "notes": spec.notes,
    }
    if check_res:
        meta["export_check"] = check_res
    with open(os.path.join(out_dir, spec.name + ".json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    return meta


def versions():
    v = {"python": sys.version.split()[0], "numpy": np.__version__}
    for mod in ("torch", "torchvision", "timm", "transformers", "onnx", "onnxscript", "onnxruntime",
                "tensorflow", "keras", "tf_keras", "tf2onnx"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            v[mod] = None
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--subset", help="a subset named in run_corpus.py's SUBSETS (e.g. ci)")
    ap.add_argument("--list", action="store_true", help="print the registry and exit")
    ap.add_argument("--no-check", action="store_true", help="skip the ORT-vs-framework sanity check")
    a = ap.parse_args()

    specs = REGISTRY
    if a.subset:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from run_corpus import SUBSETS  # one home for the subsets
        if a.subset not in SUBSETS:
            ap.error(f"unknown subset '{a.subset}' (known: {', '.join(sorted(SUBSETS))})")
        a.only = ",".join(SUBSETS[a.subset])
    if a.only:
        want = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in want if n not in {s.name for s in REGISTRY}]
        if unknown:
            ap.error(f"unknown model(s): {', '.join(unknown)}")
        specs = [s for s in REGISTRY if s.name in want]
    if a.list:
        for s in specs:
            print(f"{s.name:40s} {s.exporter:12s} opset {s.opset:<3d} {s.category:20s} {s.source}")
        print(f"{len(specs)} models")
        return 0
    if not a.out_dir:
        ap.error("OUT_DIR is required")
    os.makedirs(a.out_dir, exist_ok=True)

    try:
        import torch
        torch.set_num_threads(2)
        torch.use_deterministic_algorithms(True, warn_only=True)
    except Exception:  # noqa: BLE001
        pass

    import warnings
    warnings.filterwarnings("ignore")

    ok, failed = [], {}
    t_all = time.time()
    for n, s in enumerate(specs, 1):
        t0 = time.time()
        print(f"[{n}/{len(specs)}] {s.name} ({s.exporter}, opset {s.opset}) ...", flush=True)
        try:
            meta = build_one(s, a.out_dir, not a.no_check)
            chk = meta.get("export_check", {}).get("ort_vs_framework_rel_err")
            print(f"    ok: {meta['size_bytes'] / 1e6:.1f} MB, {meta['nodes']} nodes, opset {meta['opset']}, "
                  f"{time.time() - t0:.1f} s" + (f", ORT vs framework {chk:.2e}" if chk is not None else ""),
                  flush=True)
            if chk is not None and chk > 1e-3:
                print(f"    WARNING: ONNX Runtime disagrees with the framework ({chk:.2e})", flush=True)
            ok.append(meta)
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}".strip().splitlines()
            failed[s.name] = msg[0][:400] if msg else type(e).__name__
            print(f"    FAILED: {failed[s.name]}", flush=True)
            if os.environ.get("CORPUS_DEBUG"):
                traceback.print_exc()
            for suffix in (".onnx", ".json", ".onnx.data"):
                p = os.path.join(a.out_dir, s.name + suffix)
                if os.path.exists(p):
                    os.remove(p)
        gc.collect()

    # the manifest lists every model present in OUT_DIR (so --only runs keep earlier entries)
    entries = {}
    man_path = os.path.join(a.out_dir, "manifest.json")
    for f in sorted(os.listdir(a.out_dir)):
        if f.endswith(".json") and f != "manifest.json" and os.path.exists(os.path.join(a.out_dir, f[:-5] + ".onnx")):
            with open(os.path.join(a.out_dir, f)) as fh:
                m = json.load(fh)
            entries[m["name"]] = {k: m[k] for k in ("name", "source", "category", "exporter", "opset", "size_bytes",
                                                     "inputs", "outputs")}
    order = [s.name for s in REGISTRY]
    models = sorted(entries.values(), key=lambda m: order.index(m["name"]) if m["name"] in order else 1 << 30)
    prev_failed = {}
    if os.path.exists(man_path):
        try:
            with open(man_path) as fh:
                prev_failed = json.load(fh).get("failed", {})
        except Exception:  # noqa: BLE001
            prev_failed = {}
    prev_failed = {k: v for k, v in prev_failed.items() if k not in entries and k in order}
    prev_failed.update(failed)
    manifest = {"generator": "tests/models/corpus/make_corpus.py", "versions": versions(), "count": len(models),
                "total_bytes": sum(m["size_bytes"] for m in models), "models": models, "failed": prev_failed}
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"\n{len(ok)} of {len(specs)} exported in {time.time() - t_all:.0f} s; "
          f"manifest lists {len(models)} models, {manifest['total_bytes'] / 1e6:.0f} MB")
    for k, v in failed.items():
        print(f"  FAILED {k}: {v}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
