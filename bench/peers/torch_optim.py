#!/usr/bin/python3
"""The optimisers of torch.optim on the tiny case tests/test_optim.c runs
(three parameters: a layer's weight and bias, a second layer's weight), for
five steps of fixed gradients; prints JSON that test_optim compares with
the server's steps (tests/fixtures/optim/torch.json holds one run).

  /usr/bin/python3 bench/peers/torch_optim.py > tests/fixtures/optim/torch.json

Needs python3-torch (make bench installs it)."""
import json

import torch

W0 = [1.0, -2.0, 0.5]
GRADS = [[0.5, -1.0, 2.0], [-0.25, 3.0, 0.125], [1.5, 0.75, -0.5],
         [0.0, -0.5, 4.0], [2.0, 2.0, -1.0]]


def run(kind):
    w = [torch.tensor([x], dtype=torch.float32, requires_grad=True) for x in W0]
    if kind == "adamw":
        # decay the weights (0, 2), not the bias (1), as nanoGPT's groups
        opt = torch.optim.AdamW([{"params": [w[0], w[2]], "weight_decay": 0.1},
                                 {"params": [w[1]], "weight_decay": 0.0}],
                                lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                foreach=False)
    elif kind == "adam":
        opt = torch.optim.Adam(w, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                               weight_decay=0.05, foreach=False)
    elif kind == "nesterov":
        opt = torch.optim.SGD(w, lr=0.01, momentum=0.9, nesterov=True,
                              weight_decay=0.05, foreach=False)
    else:  # clipped sgd: clip_grad_norm_ to 1 over all three
        opt = torch.optim.SGD(w, lr=0.1, foreach=False)
    steps = []
    for g in GRADS:
        opt.zero_grad()
        for p, x in zip(w, g):
            p.grad = torch.tensor([x], dtype=torch.float32)
        if kind == "clip":
            torch.nn.utils.clip_grad_norm_(w, 1.0)
        opt.step()
        steps.append([float(p.item()) for p in w])
    return steps


print(json.dumps({"torch": torch.__version__, "w0": W0, "grads": GRADS,
                  **{k: run(k) for k in ("adamw", "adam", "nesterov", "clip")}},
                 indent=1))
