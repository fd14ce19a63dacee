"""One process of the multi-process check (tests/test_multiprocess.py).

Usage: python tests/multiprocess_worker.py PROCESS_ID NUM_PROCESSES PORT OUT

Each process sees 2 CPU devices; ``jax.distributed.initialize`` joins them
into one 4-device mesh (gloo CPU collectives), and the same programs as the
single-process reference run sharded over it: a cpSGD distributed-mean round
and three Q-DPSGD-1 gossip rounds. Process 0 writes the results to OUT.
"""

import os
import sys

os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=2'

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import multiprocess_programs as programs  # pylint: disable=g-import-not-at-top,wrong-import-position


def main() -> None:
  process_id, num_processes, port, out = (int(sys.argv[1]), int(sys.argv[2]),
                                          sys.argv[3], sys.argv[4])
  try:
    jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  except Exception as e:  # pylint: disable=broad-exception-caught
    print(f'NO_CPU_COLLECTIVES: {e}', flush=True)
    sys.exit(3)
  jax.distributed.initialize(f'localhost:{port}', num_processes=num_processes,
                             process_id=process_id)
  assert jax.device_count() == 2 * num_processes, jax.devices()
  results = programs.run_all(programs.global_mesh)
  if process_id == 0:
    np.savez(out, **results)
  jax.distributed.shutdown()


if __name__ == '__main__':
  main()
