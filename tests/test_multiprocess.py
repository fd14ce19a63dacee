"""The multi-process (multi-host) path on localhost: two processes of two
CPU devices each join one 4-device mesh with ``jax.distributed.initialize``
(gloo CPU collectives) and run a cpSGD round and Q-DPSGD-1 gossip rounds
sharded over it; the results must equal the single-process vmapped run from
the same keys bit for bit."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import multiprocess_programs as programs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NUM_PROCESSES = 2
TIMEOUT_S = 300


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


def _launch(out: str) -> None:
  port = str(_free_port())
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
  env.pop('JAX_DISABLE_MOST_OPTIMIZATIONS', None)  # as users compile
  procs = [subprocess.Popen(
      [sys.executable, os.path.join(HERE, 'multiprocess_worker.py'), str(i),
       str(NUM_PROCESSES), port, out], env=env, cwd=ROOT,
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for i in range(NUM_PROCESSES)]
  logs = []
  try:
    for p in procs:
      logs.append(p.communicate(timeout=TIMEOUT_S)[0])
  except subprocess.TimeoutExpired:
    for p in procs:
      p.kill()
    pytest.fail(f'the {NUM_PROCESSES} processes did not finish within '
                f'{TIMEOUT_S} s')
  for p, log in zip(procs, logs):
    if 'NO_CPU_COLLECTIVES' in log:
      pytest.fail('jax has no CPU collectives backend (gloo) here: '
                  + log.strip().splitlines()[-1])
    assert p.returncode == 0, log[-3000:]


@pytest.mark.slow
@pytest.mark.usefixtures('full_optimization')
def test_two_processes_equal_the_single_process_run_bitwise(tmp_path):
  out = str(tmp_path / 'multiprocess.npz')
  _launch(out)
  got = np.load(out)
  want = programs.run_all(None)  # vmapped, one process
  assert set(got.files) == set(want)
  for name, value in want.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_importing_dpjax_starts_no_jax_backend():
  """A multi-process run calls jax.distributed.initialize after importing
  dpjax, which must therefore not create arrays at import time."""
  code = ('import jax._src.xla_bridge as xb, dpjax, dpjax.audit, '
          'multiprocess_programs; assert not xb._backends, xb._backends')
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
  proc = subprocess.run([sys.executable, '-c', code], env=env, cwd=ROOT,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
