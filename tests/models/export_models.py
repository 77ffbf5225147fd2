#!/usr/bin/env python3
"""Exports the fusion test models (random weights, eval mode, static shapes) as ONNX.

Usage: export_models.py OUT_DIR [--force]
Writes OUT_DIR/resnet18.onnx, mobilenet_v3_small.onnx and bert_encoder.onnx; a
file that already exists is kept unless --force. Exits 1 with a clear message
when torch, torchvision or onnx cannot be imported (the test must fail, not skip).
"""
import math
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torchvision
except Exception as e:  # noqa: BLE001
    print(f"export_models.py: cannot import torch/torchvision ({e}); "
          "install them (deploy/bootstrap.sh does: pip install torch torchvision onnx)", file=sys.stderr)
    sys.exit(1)

OPSET = 17


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        def split(t):
            return t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.o(ctx)


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden)
        self.ff1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.ff2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff2(self.act(self.ff1(x))))


class BertEncoder(nn.Module):
    """BERT-style: token + position embeddings, LayerNorm, post-LN encoder layers."""

    def __init__(self, vocab=1000, seq=128, hidden=256, heads=4, layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList([EncoderLayer(hidden, heads, 4 * hidden) for _ in range(layers)])

    def forward(self, ids):
        x = self.ln(self.tok(ids) + self.pos)
        for layer in self.layers:
            x = layer(x)
        return x


def export(model, args, path, input_names):
    model.eval()
    kwargs = dict(opset_version=OPSET, input_names=input_names, output_names=["output"],
                  do_constant_folding=True)
    tmp = path + ".tmp"
    with torch.no_grad():
        try:
            torch.onnx.export(model, args, tmp, dynamo=False, **kwargs)
        except TypeError:  # a torch without the dynamo flag: the legacy exporter is the default
            torch.onnx.export(model, args, tmp, **kwargs)
    os.replace(tmp, path)


def main():
    if len(sys.argv) < 2:
        print("usage: export_models.py OUT_DIR [--force]", file=sys.stderr)
        return 2
    out = sys.argv[1]
    force = "--force" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    models = {
        "resnet18.onnx": (lambda: torchvision.models.resnet18(weights=None),
                          lambda: (torch.randn(1, 3, 224, 224),), ["input"]),
        "mobilenet_v3_small.onnx": (lambda: torchvision.models.mobilenet_v3_small(weights=None),
                                    lambda: (torch.randn(1, 3, 224, 224),), ["input"]),
        "bert_encoder.onnx": (lambda: BertEncoder(),
                              lambda: (torch.randint(0, 1000, (1, 128), dtype=torch.int64),), ["ids"]),
    }
    for name, (make, make_args, input_names) in models.items():
        path = os.path.join(out, name)
        if os.path.exists(path) and not force:
            print(f"{path}: exists, kept")
            continue
        export(make(), make_args(), path, input_names)
        print(f"{path}: written ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
