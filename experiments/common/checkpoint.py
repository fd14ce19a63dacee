"""Checkpoints of a training run with orbax-checkpoint.

A checkpoint holds the state arrays (params and optimizer state, which carries
the noise transform's step counter and key) under ``state``, and JSON metadata
under ``meta``: the step (which fixes the next batch key), the privacy ledger,
the metric history, the run's configuration and a SHA-256 digest of the state.

Integrity:

* orbax writes a step into a temporary directory and renames it when complete,
  so a process killed mid-save leaves no half-visible step.
* Restore verifies the digest. A step that fails to load or to verify is set
  aside (renamed ``corrupt-<step>``) with a warning, and the next older step is
  tried.
* If checkpoints exist but none is good, or they were written under another
  configuration, ``CheckpointError`` is raised: a run never silently restarts
  from step 0 with a fresh ledger.
"""

import hashlib
import json
import os
from typing import Any
import warnings

import jax
import numpy as np
import orbax.checkpoint as ocp


class CheckpointError(RuntimeError):
  """A checkpoint directory holds a run that cannot be resumed as asked."""


def _is_key(x) -> bool:
  return isinstance(x, jax.Array) and jax.dtypes.issubdtype(
      x.dtype, jax.dtypes.prng_key)


def _to_arrays(tree):
  """Replaces typed PRNG keys by their raw uint32 data (orbax stores arrays)."""
  return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x,
                      tree)


def _from_arrays(template, tree):
  return jax.tree.map(
      lambda t, x: jax.random.wrap_key_data(x, impl=jax.random.key_impl(t))
      if _is_key(t) else x, template, tree)


def digest(tree) -> str:
  """SHA-256 of every leaf's dtype, shape and bytes, in tree order."""
  h = hashlib.sha256()
  for leaf in jax.tree.leaves(_to_arrays(tree)):
    arr = np.asarray(leaf)
    h.update(f'{arr.dtype}{arr.shape}'.encode())
    h.update(np.ascontiguousarray(arr).tobytes())
  return h.hexdigest()


def _canonical(config: dict[str, Any]) -> dict[str, Any]:
  return json.loads(json.dumps(config, sort_keys=True))


class Checkpointer:
  """Saves and restores one run's checkpoints in ``directory``.

  Args:
    directory: the run's checkpoint directory (created if missing).
    config: the run's configuration (JSON-ready); restoring a checkpoint
      written under another configuration raises ``CheckpointError``.
    max_to_keep: how many recent steps to keep (>= 2, so an older good step
      survives a corrupted newest one).
  """

  def __init__(self, directory: str, config: dict[str, Any],
               max_to_keep: int = 2):
    self.directory = os.path.abspath(directory)
    self.config = _canonical(config)
    self._options = ocp.CheckpointManagerOptions(
        max_to_keep=max(2, max_to_keep), enable_async_checkpointing=False)
    self._manager = self._open()

  def _open(self):
    return ocp.CheckpointManager(self.directory, options=self._options,
                                 item_names=('state', 'meta'))

  def steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    meta = dict(meta, step=step, config=self.config, digest=digest(state))
    self._manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(_to_arrays(state)),
        meta=ocp.args.JsonSave(meta)), force=True)
    self._manager.wait_until_finished()

  def _restore(self, step: int, template: Any):
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                            _to_arrays(template))
    out = self._manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
    state = _from_arrays(template, out['state'])
    meta = out['meta']
    if meta.get('step') != step or meta.get('digest') != digest(state):
      raise CheckpointError(f'step {step} does not match its digest')
    return state, meta

  def restore_latest(self, template: Any):
    """Returns ``(step, state, meta)`` of the newest good checkpoint, or None.

    Args:
      template: a state pytree of the right structure, shapes and dtypes.

    Raises:
      CheckpointError: checkpoints exist but none is good, or the newest
        good one was written under another configuration.
    """
    tried = []
    while self.steps():
      step = self.steps()[-1]
      try:
        state, meta = self._restore(step, template)
      except Exception as e:  # pylint: disable=broad-except
        tried.append(step)
        aside = os.path.join(self.directory, f'corrupt-{step}')
        while os.path.exists(aside):
          aside += '-again'
        warnings.warn(f'Checkpoint step {step} in {self.directory} is '
                      f'unreadable or corrupt ({type(e).__name__}: {e}); '
                      f'moved to {aside}, trying an older one.')
        self._manager.close()
        os.replace(os.path.join(self.directory, str(step)), aside)
        self._manager = self._open()
        continue
      if meta.get('config') != self.config:
        raise CheckpointError(
            f'The checkpoint in {self.directory} was written with another '
            f'configuration ({meta.get("config")}), not {self.config}; use a '
            'new directory.')
      return step, state, meta
    if tried:
      raise CheckpointError(
          f'No good checkpoint in {self.directory} (corrupt steps {tried} '
          'were set aside); refusing to restart from step 0.')
    return None
