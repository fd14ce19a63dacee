"""Protocols over many clients: cpSGD distributed mean estimation.

cpSGD (Agarwal et al., NeurIPS 2018): each client clips its vector, optionally
applies a shared randomized Hadamard rotation, quantizes it to k levels and
adds Bin(m, p) noise, sending integers in {0, ..., k - 1 + m}
(log2(k + m) bits per coordinate); the server decodes the exact integer sum
into an unbiased mean estimate. ``distributed_mean`` vmaps the protocol over a
leading client axis; ``distributed_mean_sharded`` runs it over a device mesh
with ``jax.shard_map`` and gives bit-identical results from the same key. The
Gaussian baseline (real-valued noise, 32 bits per coordinate) runs in the same
harness.

Example:
  >>> cfg = dpjax.distributed.cpsgd(clip_norm=1.0, levels=16, num_trials=32)
  >>> xs = jnp.ones((4, 3)) / 2
  >>> dpjax.distributed.distributed_mean(cfg, jax.random.key(0), xs).shape
  (3,)
"""

from dpjax.distributed._cpsgd import bits_per_client
from dpjax.distributed._cpsgd import bits_per_coordinate
from dpjax.distributed._cpsgd import client_encode
from dpjax.distributed._cpsgd import cpsgd
from dpjax.distributed._cpsgd import cpsgd_expected_mse
from dpjax.distributed._cpsgd import cpsgd_keys
from dpjax.distributed._cpsgd import cpsgd_mse_bound
from dpjax.distributed._cpsgd import cpsgd_round_event
from dpjax.distributed._cpsgd import CpsgdConfig
from dpjax.distributed._cpsgd import distributed_mean
from dpjax.distributed._cpsgd import distributed_mean_sharded
from dpjax.distributed._cpsgd import FLOAT32_BITS
from dpjax.distributed._cpsgd import gaussian_bits_per_client
from dpjax.distributed._cpsgd import gaussian_distributed_mean
from dpjax.distributed._cpsgd import message_length
from dpjax.distributed._cpsgd import rotated_x_max
from dpjax.distributed._cpsgd import server_decode
from dpjax.distributed._harness import client_keys
from dpjax.distributed._harness import client_sum
from dpjax.distributed._harness import shared_key

__all__ = [
    'bits_per_client',
    'bits_per_coordinate',
    'client_encode',
    'client_keys',
    'client_sum',
    'cpsgd',
    'cpsgd_expected_mse',
    'cpsgd_keys',
    'cpsgd_mse_bound',
    'cpsgd_round_event',
    'CpsgdConfig',
    'distributed_mean',
    'distributed_mean_sharded',
    'FLOAT32_BITS',
    'gaussian_bits_per_client',
    'gaussian_distributed_mean',
    'message_length',
    'rotated_x_max',
    'server_decode',
    'shared_key',
]
