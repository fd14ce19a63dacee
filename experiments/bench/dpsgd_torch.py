"""The DP-SGD benchmark's PyTorch and Opacus columns (optional).

The models are the Flax ones of ``experiments.bench.models`` rebuilt from
modules Opacus can clip, loaded with the same weights (``torch_layout``) so
that every framework's clipped sum can be checked against dpjax's before any
timing. PyTorch runs with as many intra-op threads as JAX's compute pool
(``timing.set_torch_threads``). Views handed to Opacus are contiguous: its
per-sample hooks fail on strided views (the expanded position ids and the
head transposes of the transformer).
"""

import os
from typing import Any
import warnings

import numpy as np

from experiments.bench import dpsgd_cli
from experiments.bench import models
from experiments.bench import timing

LR, CLIP, SIGMA = dpsgd_cli.LR, dpsgd_cli.CLIP, dpsgd_cli.SIGMA
COLUMNS = ('torch', 'opacus', 'opacus-ghost')


def _transformer(torch):
  """``models.Transformer`` in PyTorch (LayerNorm eps as Flax's, 1e-6)."""
  nn_t, cfg = torch.nn, models.Transformer()

  class Block(nn_t.Module):

    def __init__(self):
      super().__init__()
      self.tok = nn_t.Embedding(cfg.vocab, cfg.dim)
      self.pos = nn_t.Embedding(cfg.seq_len, cfg.dim)
      self.ln1, self.ln2, self.ln3 = (nn_t.LayerNorm(cfg.dim, eps=1e-6)
                                      for _ in range(3))
      self.q, self.k, self.v, self.o = (nn_t.Linear(cfg.dim, cfg.dim)
                                        for _ in range(4))
      self.fc1 = nn_t.Linear(cfg.dim, cfg.hidden)
      self.fc2 = nn_t.Linear(cfg.hidden, cfg.dim)
      self.head = nn_t.Linear(cfg.dim, 10)

    def forward(self, tokens):
      b, t = tokens.shape
      # batch-first and contiguous, as Opacus's per-sample hooks need
      pos = torch.arange(t, device=tokens.device).expand(b, t).contiguous()
      x = self.tok(tokens) + self.pos(pos)
      h = self.ln1(x)
      q, k, v = (z.reshape(b, t, cfg.heads, -1).transpose(1, 2).contiguous()
                 for z in (self.q(h), self.k(h), self.v(h)))
      w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1]**0.5, dim=-1)
      x = x + self.o((w @ v).transpose(1, 2).contiguous().reshape(
          b, t, cfg.dim))
      h = self.ln2(x)
      x = x + self.fc2(torch.nn.functional.gelu(self.fc1(h),
                                                approximate='tanh'))
      return self.head(self.ln3(x).mean(dim=1))

  return Block()


def build(torch, name: str):
  """The PyTorch model of benchmark model ``name``."""
  nn_t = torch.nn
  if name.startswith('mlp'):
    return nn_t.Sequential(nn_t.Flatten(), nn_t.Linear(784, 512), nn_t.Tanh(),
                           nn_t.Linear(512, 512), nn_t.Tanh(),
                           nn_t.Linear(512, 10))
  if name.startswith('transformer'):
    return _transformer(torch)
  return nn_t.Sequential(
      nn_t.Conv2d(1, 16, 8, 2, padding=2), nn_t.Tanh(),
      nn_t.MaxPool2d(2, 1), nn_t.Conv2d(16, 32, 4, 2), nn_t.Tanh(),
      nn_t.MaxPool2d(2, 1), nn_t.Flatten(), nn_t.Linear(32 * 4 * 4, 32),
      nn_t.Tanh(), nn_t.Linear(32, 10))


def _dense(tree, prefix):
  return {f'{prefix}.weight': np.asarray(tree['kernel']).T,
          f'{prefix}.bias': np.asarray(tree['bias'])}


def torch_layout(name: str, tree) -> dict[str, np.ndarray]:
  """A params-shaped Flax tree as PyTorch ``state_dict`` arrays of ``name``.

  Used for the weights and for dpjax's clipped sum (same layout). The CNN's
  Dense rows are permuted from Flax's (h, w, c) flattening to torch's
  (c, h, w).
  """
  p = tree['params']
  if name.startswith('mlp'):
    out = {}
    for i, j in ((0, 1), (1, 3), (2, 5)):
      out.update(_dense(p[f'Dense_{i}'], str(j)))
    return out
  if name.startswith('tb'):
    conv = lambda t: np.transpose(np.asarray(t), (3, 2, 0, 1))  # noqa: E731
    dense0 = np.asarray(p['Dense_0']['kernel']).reshape(4, 4, 32, 32)
    return {'0.weight': conv(p['Conv_0']['kernel']),
            '0.bias': np.asarray(p['Conv_0']['bias']),
            '3.weight': conv(p['Conv_1']['kernel']),
            '3.bias': np.asarray(p['Conv_1']['bias']),
            '7.weight': dense0.transpose(2, 0, 1, 3).reshape(512, 32).T,
            '7.bias': np.asarray(p['Dense_0']['bias']),
            **_dense(p['Dense_1'], '9')}
  attn = p['MultiHeadDotProductAttention_0']
  dim = np.asarray(attn['out']['bias']).shape[0]
  out = {'tok.weight': np.asarray(p['Embed_0']['embedding']),
         'pos.weight': np.asarray(p['Embed_1']['embedding'])}
  for i, ln in enumerate(('ln1', 'ln2', 'ln3')):
    out[f'{ln}.weight'] = np.asarray(p[f'LayerNorm_{i}']['scale'])
    out[f'{ln}.bias'] = np.asarray(p[f'LayerNorm_{i}']['bias'])
  for flax_name, t in (('query', 'q'), ('key', 'k'), ('value', 'v')):
    out[f'{t}.weight'] = np.asarray(attn[flax_name]['kernel']).reshape(
        dim, dim).T
    out[f'{t}.bias'] = np.asarray(attn[flax_name]['bias']).reshape(dim)
  out['o.weight'] = np.asarray(attn['out']['kernel']).reshape(dim, dim).T
  out['o.bias'] = np.asarray(attn['out']['bias'])
  # Flax names the Dense of an expression's outer call first.
  for flax_name, t in (('Dense_1', 'fc1'), ('Dense_0', 'fc2'),
                       ('Dense_2', 'head')):
    out.update(_dense(p[flax_name], t))
  return out


def _load(torch, model, arrays: dict[str, np.ndarray]) -> None:
  state = model.state_dict()
  missing = set(state) ^ set(arrays)
  if missing:
    raise ValueError(f'torch_layout does not match the model: {missing}')
  model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v))
                         for k, v in arrays.items()})


def full_float32(torch) -> None:
  """Float32 matmuls and convolutions without TF32 on CUDA (as JAX's
  ``jax_default_matmul_precision='highest'``)."""
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False


def _synchronized(torch, device: str, step):
  """``step`` that returns once the device has finished it."""
  if device == 'cpu':
    return step

  def run():
    step()
    torch.cuda.synchronize()

  return run


def _tensors(torch, x_np: np.ndarray, y_np: np.ndarray, batch_size: int,
             device: str):
  """The batch as PyTorch tensors on ``device`` (images NCHW, tokens int64)
  and a CPU loader of it for Opacus."""
  if x_np.ndim == 4:  # NHWC -> NCHW images
    x = torch.from_numpy(np.transpose(x_np, (0, 3, 1, 2)).copy())
  else:
    x = torch.from_numpy(x_np.astype(np.int64))
  y = torch.from_numpy(y_np.astype(np.int64))
  loader = torch.utils.data.DataLoader(
      torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
  return x.to(device), y.to(device), loader


def _opacus_step(torch, opacus, name: str, mode: str, weights, x, y, loader,
                 device: str):
  """An Opacus DP step (``mode`` 'hooks' or 'ghost'), called once: raises
  if Opacus cannot handle a layer."""
  dp_model = build(torch, name).to(device)
  _load(torch, dp_model, weights)
  dp_opt = torch.optim.SGD(dp_model.parameters(), lr=LR)
  dp_model, dp_opt, dp_crit = _private(opacus, torch.nn, dp_model, dp_opt,
                                       loader, mode, SIGMA)

  def dp_step(m=dp_model, o=dp_opt, c=dp_crit):
    o.zero_grad(set_to_none=True)
    c(m(x), y).backward()
    o.step()

  dp_step()  # fails here if Opacus cannot handle a layer
  return dp_step


def make_steps(name: str, batch_size: int, torch_modules, x_np: np.ndarray,
               y_np: np.ndarray, weights: dict[str, np.ndarray],
               threads: int, device: str = 'cpu') -> dict[str, Any]:
  """Plain PyTorch and Opacus steps, their clipped sums and the threads.

  ``device``: 'cpu', or 'cuda' (steps synchronize before they return; TF32
  off). Returns ``{'steps': column -> step(), 'skipped': column -> why,
  'clipped': column -> torch_layout arrays of the clipped sum (no noise),
  'threads': what torch reports}``.
  """
  torch, opacus = torch_modules
  warnings.filterwarnings('ignore', message='.*(Secure RNG|Full backward hook)')
  torch.manual_seed(0)
  threads_now = timing.set_torch_threads(torch, threads)
  if device != 'cpu':
    full_float32(torch)
  x, y, loader = _tensors(torch, x_np, y_np, batch_size, device)
  steps, skipped, clipped = {}, {}, {}

  model = build(torch, name).to(device)
  _load(torch, model, weights)
  opt = torch.optim.SGD(model.parameters(), lr=LR)
  criterion = torch.nn.CrossEntropyLoss()

  def torch_step():
    opt.zero_grad(set_to_none=True)
    criterion(model(x), y).backward()
    opt.step()

  steps['torch'] = _synchronized(torch, device, torch_step)
  for mode in ('hooks', 'ghost'):
    column = 'opacus' if mode == 'hooks' else 'opacus-ghost'
    try:
      clipped[column] = _opacus_clipped_sum(torch, opacus, name, mode, weights,
                                            x, y, loader, device)
      dp_step = _opacus_step(torch, opacus, name, mode, weights, x, y, loader,
                             device)
    except Exception as e:  # pylint: disable=broad-except
      skipped[column] = f'Opacus {mode} failed ({type(e).__name__}: {e})'
      continue
    steps[column] = _synchronized(torch, device, dp_step)
  return {'steps': steps, 'skipped': skipped, 'clipped': clipped,
          'threads': threads_now}


def _private(opacus, nn_t, model, opt, loader, mode: str, sigma: float):
  out = opacus.PrivacyEngine().make_private(
      module=model, optimizer=opt, data_loader=loader,
      criterion=nn_t.CrossEntropyLoss(), noise_multiplier=sigma,
      max_grad_norm=CLIP, poisson_sampling=False, grad_sample_mode=mode)
  if mode == 'ghost':
    model, opt, crit, _ = out
  else:
    model, opt, _ = out
    crit = nn_t.CrossEntropyLoss()
  return model, opt, crit


def _opacus_clipped_sum(torch, opacus, name, mode, weights, x, y, loader,
                        device):
  """Opacus's sum of clipped per-example gradients (noise multiplier 0)."""
  model = build(torch, name).to(device)
  _load(torch, model, weights)
  opt = torch.optim.SGD(model.parameters(), lr=LR)
  model, opt, crit = _private(opacus, torch.nn, model, opt, loader, mode, 0.0)
  opt.zero_grad(set_to_none=True)
  crit(model(x), y).backward()
  if mode == 'ghost':
    # Ghost clipping's second backward pass leaves the clipped sum in p.grad
    # (its clip_and_accumulate is a no-op); accumulate copies it.
    opt.accumulate()
  else:
    opt.clip_and_accumulate()
  # p.summed_grad: the clipped sum, before noise
  prefix = '_module.'
  return {k[len(prefix):] if k.startswith(prefix) else k:
          p.summed_grad.detach().cpu().numpy().copy()
          for k, p in model.named_parameters()}


def version_info(torch_modules, device: str = 'cpu') -> dict[str, str]:
  torch, opacus = torch_modules
  gpu = ({'torch_device': torch.cuda.get_device_name(0), 'torch_tf32': 'off'}
         if device != 'cpu' else {})
  return {**gpu, 'torch': torch.__version__, 'opacus': opacus.__version__,
          'torch_cpu_capability': getattr(
              torch.backends.cpu, 'get_cpu_capability', lambda: '?')(),
          'omp_num_threads': os.environ.get('OMP_NUM_THREADS', 'unset')}
