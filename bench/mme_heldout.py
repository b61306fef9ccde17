"""Held-out MME cases for bench_locate: delete one method of a torch class at run time (in a forked child),
run small workloads, keep the real tracebacks of AttributeErrors. Usage: python bench/mme_heldout.py OUT.jsonl"""

# ruff: noqa: E701, E702
import ast
import importlib
import inspect
import json
import os
import sys
import traceback

import torch
import torch.distributions
import torch.nn.modules.batchnorm
import torch.nn.modules.conv
import torch.nn.modules.rnn
import torch.optim.lr_scheduler
import torch.utils.data
import torch.utils.data.dataloader
import torch.utils.data.sampler


def w_train():
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    for _ in range(2):
        opt.zero_grad(); loss = m(torch.randn(3, 4)).pow(2).mean(); loss.backward(); opt.step(); sched.step()
    sd = m.state_dict(); m.load_state_dict(sd); m.eval(); m.train(); list(m.named_parameters()); m.to(torch.float64)
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    osd = opt.state_dict(); opt.load_state_dict(osd)

def w_conv():
    m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.ReLU())
    m(torch.randn(2, 1, 5, 5)).sum().backward(); m.eval(); m(torch.randn(1, 1, 5, 5))
    r = torch.nn.LSTM(3, 4, batch_first=True); r(torch.randn(2, 5, 3)); r.flatten_parameters()
    g = torch.nn.GRU(3, 4); g(torch.randn(5, 2, 3))

def w_dist():
    d = torch.distributions.Normal(torch.zeros(2), torch.ones(2)); d.sample(); d.log_prob(torch.zeros(2)); d.entropy(); d.rsample()
    c = torch.distributions.Categorical(logits=torch.randn(3)); c.sample(); c.log_prob(torch.tensor(1)); c.entropy()
    b = torch.distributions.Bernoulli(probs=torch.tensor([0.3])); b.sample(); b.entropy(); _ = b.mean
    torch.distributions.kl_divergence(d, torch.distributions.Normal(torch.ones(2), torch.ones(2)))

def w_data():
    ds = torch.utils.data.TensorDataset(torch.randn(6, 2), torch.arange(6))
    for _ in torch.utils.data.DataLoader(ds, batch_size=2, shuffle=True): pass
    for _ in torch.utils.data.DataLoader(ds, batch_size=4, drop_last=True): pass
    len(torch.utils.data.DataLoader(ds, batch_size=2))

WORK = {"train": w_train, "conv": w_conv, "dist": w_dist, "data": w_data}
CLASSES = [
    ("torch.nn.modules.module", "Module", ["train", "conv"]),
    ("torch.optim.optimizer", "Optimizer", ["train"]),
    ("torch.optim.adam", "Adam", ["train"]),
    ("torch.optim.lr_scheduler", "LRScheduler", ["train"]),
    ("torch.optim.lr_scheduler", "StepLR", ["train"]),
    ("torch.nn.modules.batchnorm", "_NormBase", ["conv"]),
    ("torch.nn.modules.batchnorm", "_BatchNorm", ["conv"]),
    ("torch.nn.modules.conv", "_ConvNd", ["conv"]),
    ("torch.nn.modules.conv", "Conv2d", ["conv"]),
    ("torch.nn.modules.rnn", "RNNBase", ["conv"]),
    ("torch.nn.modules.rnn", "LSTM", ["conv"]),
    ("torch.distributions.distribution", "Distribution", ["dist"]),
    ("torch.distributions.normal", "Normal", ["dist"]),
    ("torch.distributions.categorical", "Categorical", ["dist"]),
    ("torch.distributions.exp_family", "ExponentialFamily", ["dist"]),
    ("torch.utils.data.dataloader", "DataLoader", ["data"]),
    ("torch.utils.data.dataloader", "_BaseDataLoaderIter", ["data"]),
    ("torch.utils.data.dataloader", "_SingleProcessDataLoaderIter", ["data"]),
    ("torch.utils.data.sampler", "BatchSampler", ["data"]),
    ("torch.utils.data.sampler", "RandomSampler", ["data"]),
    ("torch.utils.data.dataset", "TensorDataset", ["data"]),
    ("torch._tensor", "Tensor", ["train", "dist"]),
]
out = open(sys.argv[1], "w")
site = os.path.dirname(os.path.dirname(torch.__file__))
for modname, cname, works in CLASSES:
    mod = importlib.import_module(modname)
    cls = getattr(mod, cname)
    path = inspect.getsourcefile(cls)
    rel = os.path.relpath(path, site)
    tree = ast.parse(open(path).read())
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cname), None)
    if node is None:
        continue
    methods = [i.name for i in node.body if isinstance(i, ast.FunctionDef) and not (i.name.startswith("__") and i.name.endswith("__")) and not i.decorator_list]
    for meth in methods:
        if meth not in cls.__dict__:
            continue
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            res = None
            try:
                delattr(cls, meth)
                for wk in works:
                    WORK[wk]()
            except AttributeError as exc:
                res = {"tb": "".join(traceback.format_exception(exc)), "msg": str(exc)}
            except Exception:
                res = None
            os.write(w, json.dumps(res).encode()); os.close(w); os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk: break
            data += chunk
        os.waitpid(pid, 0)
        res = json.loads(data or b"null")
        if res and f"'{meth}'" in res["msg"]:
            out.write(json.dumps({"module": modname, "class": cname, "name": meth, "file": rel, "traceback": res["tb"], "error": "AttributeError: " + res["msg"]}) + "\n"); out.flush()
