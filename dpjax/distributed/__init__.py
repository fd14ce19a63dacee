"""Protocols over many clients, on one client harness.

The harness (``shared_key``, ``client_keys``, ``client_sum``) derives every
client's key from the round key and the client's index, maps a per-client
encoder over the leading client axis and sums the messages exactly: vmapped
on one device, or with ``jax.shard_map`` over a mesh axis, bit-identically.

cpSGD (Agarwal et al., NeurIPS 2018): each client clips its vector,
optionally applies a shared randomized Hadamard rotation, quantizes it to k
levels and adds Bin(m, p) noise, sending integers in {0, ..., k - 1 + m}
(``bits_per_coordinate``: log2(k + m) bits); the server decodes the exact
integer sum into an unbiased mean estimate. ``distributed_mean`` vmaps the
protocol; ``distributed_mean_sharded`` shards it over a mesh axis. The
Gaussian protocol (real-valued noise, 32 bits per coordinate) is the
baseline. Each protocol has an event companion (``cpsgd_round_event``,
``gaussian_protocol_round_event``) and a bit count per client and round
(``cpsgd_bits``, ``gaussian_protocol_bits``) built from the same
hyperparameters.

The distributed discrete Gaussian (Kairouz et al., ICML 2021) and Skellam
(Agarwal et al., NeurIPS 2021) protocols (``DistributedDpConfig``,
``secure_sum_round``): clip, rotate, scale, round conditionally, add an
exact discrete Gaussian or a Skellam share, reduce modulo 2^b; the modular
sum (optionally pairwise-masked) is decoded by the server. Their companion
is ``distributed_dp_round_event``, their bits ``distributed_dp_bits`` and
``calibrate_distributed_dp`` chooses gamma and the noise as the papers do.

Example:
  >>> cfg = dpjax.distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16,
  ...                                     trials=32)
  >>> xs = jnp.ones((4, 3)) / 2
  >>> dpjax.distributed.distributed_mean(cfg, jax.random.key(0), xs).shape
  (3,)
"""

from dpjax.distributed._cpsgd import client_encode
from dpjax.distributed._cpsgd import cpsgd_round_event
from dpjax.distributed._cpsgd import distributed_mean
from dpjax.distributed._cpsgd import distributed_mean_sharded
from dpjax.distributed._cpsgd import server_decode
from dpjax.distributed._cpsgd_config import bits_per_coordinate
from dpjax.distributed._cpsgd_config import cpsgd_bits
from dpjax.distributed._cpsgd_config import CpsgdConfig
from dpjax.distributed._cpsgd_config import rotated_linf_clip
from dpjax.distributed._cpsgd_error import cpsgd_expected_mse
from dpjax.distributed._cpsgd_error import cpsgd_mse_bound
from dpjax.distributed._ddp import client_encode_modular
from dpjax.distributed._ddp import conditional_round
from dpjax.distributed._ddp import MAX_SKELLAM_MU
from dpjax.distributed._ddp import secure_sum
from dpjax.distributed._ddp import secure_sum_round
from dpjax.distributed._ddp import SecureSumRound
from dpjax.distributed._ddp import server_decode_modular
from dpjax.distributed._ddp_calibrate import calibrate_distributed_dp
from dpjax.distributed._ddp_config import distributed_dp_bits
from dpjax.distributed._ddp_config import distributed_dp_round_event
from dpjax.distributed._ddp_config import DistributedDpConfig
from dpjax.distributed._secure_sum import centered
from dpjax.distributed._secure_sum import pairwise_mask
from dpjax.distributed._secure_sum import to_modular
from dpjax.distributed._gaussian import gaussian_distributed_mean
from dpjax.distributed._gaussian import gaussian_protocol_bits
from dpjax.distributed._gaussian import gaussian_protocol_round_event
from dpjax.distributed._harness import client_keys
from dpjax.distributed._harness import client_sum
from dpjax.distributed._harness import shared_key

__all__ = [
    'bits_per_coordinate',
    'calibrate_distributed_dp',
    'centered',
    'client_encode_modular',
    'conditional_round',
    'distributed_dp_bits',
    'distributed_dp_round_event',
    'DistributedDpConfig',
    'MAX_SKELLAM_MU',
    'pairwise_mask',
    'secure_sum',
    'secure_sum_round',
    'SecureSumRound',
    'server_decode_modular',
    'to_modular',
    'client_encode',
    'client_keys',
    'client_sum',
    'cpsgd_bits',
    'cpsgd_expected_mse',
    'cpsgd_mse_bound',
    'cpsgd_round_event',
    'CpsgdConfig',
    'distributed_mean',
    'distributed_mean_sharded',
    'gaussian_distributed_mean',
    'gaussian_protocol_bits',
    'gaussian_protocol_round_event',
    'rotated_linf_clip',
    'server_decode',
    'shared_key',
]
