"""Client protocols: many clients, one securely summed message per round.

The harness (``shared_key``, ``client_keys``, ``client_sum``) derives every
client's key from the round key and the client's index, maps a per-client
encoder over the leading client axis and sums the messages exactly: vmapped
on one device, or with ``jax.shard_map`` over a mesh axis, bit-identically.

cpSGD (Agarwal et al., NeurIPS 2018): each client clips its vector,
optionally applies a shared randomized Hadamard rotation, quantizes it to k
levels and adds Bin(m, p) noise, sending integers in {0, ..., k - 1 + m}
(``bits_per_coordinate``: log2(k + m) bits); the server decodes the exact
integer sum into an unbiased mean estimate (``client_encode``,
``server_decode``; ``distributed_mean`` vmaps the protocol,
``distributed_mean_sharded`` shards it over a mesh axis). The distributed
discrete Gaussian (Kairouz et al., ICML 2021) and Skellam (Agarwal et al.,
NeurIPS 2021) protocols (``DistributedDpConfig``, ``secure_sum_round``):
clip, rotate, scale, round conditionally, add an exact discrete Gaussian or
a Skellam share, reduce modulo 2^b; the modular sum (optionally
pairwise-masked, ``pairwise_mask``) is decoded by the server. The Gaussian
protocol (real-valued noise, 32 bits per coordinate) is the baseline. Each
has its event (``cpsgd_event``, ``distributed_dp_event``, ``*_event(...,
*, steps=1)``; the Gaussian protocol's is the Gaussian mechanism's,
``accounting.gaussian_event``) and a bit count per client and round (``cpsgd_bits``, ``distributed_dp_bits``,
``gaussian_protocol_bits``).

``Protocol`` is what a training loop needs from any of them: the client's
``encode``, the server's ``decode`` of the summed messages, their
composition ``mean``, the DpEvent of one round and the bits one client
sends; ``cpsgd_protocol``, ``distributed_dp_protocol``,
``gaussian_distributed_mean_protocol`` and ``plain_mean_protocol`` build
one from the same hyperparameters. Every name here is also exported by
``dpjax.distributed``.

Example:
  >>> p = dpjax.distributed.protocols.gaussian_distributed_mean_protocol(
  ...     1.0, 0.0, 2, 2)
  >>> key, xs = jax.random.key(0), jnp.array([[3.0, 4.0], [0.6, 0.8]])
  >>> summed = sum(p.encode(key, i, xs[i], p.param) for i in range(2))
  >>> p.decode(key, summed, p.param)
  Array([0.6, 0.8], dtype=float32)
"""

from dpjax.distributed.protocols._cpsgd import client_encode
from dpjax.distributed.protocols._cpsgd import cpsgd_event
from dpjax.distributed.protocols._cpsgd import distributed_mean
from dpjax.distributed.protocols._cpsgd import distributed_mean_sharded
from dpjax.distributed.protocols._cpsgd import server_decode
from dpjax.distributed.protocols._cpsgd_config import CpsgdConfig
from dpjax.distributed.protocols._cpsgd_config import bits_per_coordinate
from dpjax.distributed.protocols._cpsgd_config import cpsgd_bits
from dpjax.distributed.protocols._cpsgd_config import rotated_linf_clip
from dpjax.distributed.protocols._cpsgd_error import cpsgd_expected_mse
from dpjax.distributed.protocols._cpsgd_error import cpsgd_mse_bound
from dpjax.distributed.protocols._ddp import MAX_SKELLAM_MU
from dpjax.distributed.protocols._ddp import SecureSumRound
from dpjax.distributed.protocols._ddp import client_encode_modular
from dpjax.distributed.protocols._ddp import conditional_round
from dpjax.distributed.protocols._ddp import secure_sum
from dpjax.distributed.protocols._ddp import secure_sum_round
from dpjax.distributed.protocols._ddp import server_decode_modular
from dpjax.distributed.protocols._ddp_calibrate import calibrate_distributed_dp
from dpjax.distributed.protocols._ddp_config import DistributedDpConfig
from dpjax.distributed.protocols._ddp_config import distributed_dp_bits
from dpjax.distributed.protocols._ddp_config import distributed_dp_event
from dpjax.distributed.protocols._gaussian import gaussian_distributed_mean
from dpjax.distributed.protocols._gaussian import gaussian_protocol_bits
from dpjax.distributed._harness import client_keys
from dpjax.distributed._harness import client_sum
from dpjax.distributed._harness import shared_key
from dpjax.distributed.protocols._protocol import Protocol
from dpjax.distributed.protocols._protocol import cpsgd_protocol
from dpjax.distributed.protocols._protocol import distributed_dp_protocol
from dpjax.distributed.protocols._protocol import gaussian_distributed_mean_protocol
from dpjax.distributed.protocols._protocol import plain_mean_protocol
from dpjax.distributed.protocols._secure_sum import centered
from dpjax.distributed.protocols._secure_sum import pairwise_mask
from dpjax.distributed.protocols._secure_sum import to_modular

__all__ = [
    'bits_per_coordinate',
    'calibrate_distributed_dp',
    'centered',
    'client_encode',
    'client_encode_modular',
    'client_keys',
    'client_sum',
    'conditional_round',
    'cpsgd_bits',
    'cpsgd_event',
    'cpsgd_expected_mse',
    'cpsgd_mse_bound',
    'cpsgd_protocol',
    'CpsgdConfig',
    'distributed_dp_bits',
    'distributed_dp_event',
    'distributed_dp_protocol',
    'distributed_mean',
    'distributed_mean_sharded',
    'DistributedDpConfig',
    'gaussian_distributed_mean',
    'gaussian_distributed_mean_protocol',
    'gaussian_protocol_bits',
    'MAX_SKELLAM_MU',
    'pairwise_mask',
    'plain_mean_protocol',
    'Protocol',
    'rotated_linf_clip',
    'secure_sum',
    'secure_sum_round',
    'SecureSumRound',
    'server_decode',
    'server_decode_modular',
    'shared_key',
    'to_modular',
]
