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
baseline. Each protocol has an event companion (``cpsgd_event``,
``gaussian_distributed_mean_event``, ``*_event(..., *, steps=1)``) and a bit
count per client and round (``cpsgd_bits``, ``gaussian_protocol_bits``)
built from the same hyperparameters.

Decentralized learning (Ding et al., Q-DPSGD): gossip graphs
(``erdos_renyi``, ``ring``, ``complete``) and their mixing matrices
(``mixing_matrix``, ``spectral_gap``); ``gossip`` and the agent harness
``run_agents`` (vmapped, or sharded over a mesh axis bit-identically); the
algorithms ``qdpsgd1``, ``qdpsgd2``, ``dsgd`` and ``sdm`` as jitted rounds
over all agents; and their per-agent accounting (``agent_ledgers``,
``run_epsilon``, ``calibrate_decentralized``, the paper's Theorems 1 and 5 in
``paper_epsilon`` beside the sound bound): ``qdpsgd_event`` from the
hyperparameters, ``qdpsgd_step_event`` read from the metrics of the round
that ran.

The distributed discrete Gaussian (Kairouz et al., ICML 2021) and Skellam
(Agarwal et al., NeurIPS 2021) protocols (``DistributedDpConfig``,
``secure_sum_round``): clip, rotate, scale, round conditionally, add an
exact discrete Gaussian or a Skellam share, reduce modulo 2^b; the modular
sum (optionally pairwise-masked) is decoded by the server. Their companion
is ``distributed_dp_event``, their bits ``distributed_dp_bits`` and
``calibrate_distributed_dp`` chooses gamma and the noise as the papers do.

``Protocol`` is what a training loop needs from any of these client
protocols: a traceable mean of the client vectors, the DpEvent of one round
and the bits one client sends.

Example:
  >>> cfg = dpjax.distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16,
  ...                                     trials=32)
  >>> xs = jnp.ones((4, 3)) / 2
  >>> dpjax.distributed.distributed_mean(cfg, jax.random.key(0), xs).shape
  (3,)
"""

from dpjax import _deprecation
from dpjax.distributed._cpsgd import client_encode
from dpjax.distributed._decentralized import AgentBatch
from dpjax.distributed._decentralized import ALGORITHMS
from dpjax.distributed._decentralized import DecentralizedAlgorithm
from dpjax.distributed._decentralized import DecentralizedState
from dpjax.distributed._decentralized import qdpsgd1
from dpjax.distributed._decentralized import qdpsgd2
from dpjax.distributed._decentralized import RoundMetrics
from dpjax.distributed._decentralized_baselines import dsgd
from dpjax.distributed._decentralized_baselines import sdm
from dpjax.distributed._decentralized_privacy import agent_epsilons
from dpjax.distributed._decentralized_privacy import agent_ledgers
from dpjax.distributed._decentralized_privacy import calibrate_decentralized
from dpjax.distributed._decentralized_privacy import DecentralizedPrivacy
from dpjax.distributed._decentralized_privacy import paper_epsilon
from dpjax.distributed._decentralized_privacy import paper_is_upper_bound
from dpjax.distributed._decentralized_privacy import paper_rdp_coefficients
from dpjax.distributed._decentralized_privacy import qdpsgd2_sensitivities
from dpjax.distributed._decentralized_privacy import qdpsgd_event
from dpjax.distributed._decentralized_privacy import qdpsgd_step_event
from dpjax.distributed._decentralized_privacy import run_epsilon
from dpjax.distributed._gossip import agent_mesh
from dpjax.distributed._gossip import gossip
from dpjax.distributed._gossip import run_agents
from dpjax.distributed._protocol import Protocol
from dpjax.distributed._cpsgd import cpsgd_event
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
from dpjax.distributed._ddp_config import distributed_dp_event
from dpjax.distributed._ddp_config import DistributedDpConfig
from dpjax.distributed._secure_sum import centered
from dpjax.distributed._secure_sum import pairwise_mask
from dpjax.distributed._secure_sum import to_modular
from dpjax.distributed._gaussian import gaussian_distributed_mean
from dpjax.distributed._gaussian import gaussian_protocol_bits
from dpjax.distributed._gaussian import gaussian_distributed_mean_event
from dpjax.distributed._harness import client_keys
from dpjax.distributed._harness import client_sum
from dpjax.distributed._harness import shared_key
from dpjax.distributed._topology import complete
from dpjax.distributed._topology import erdos_renyi
from dpjax.distributed._topology import laplacian
from dpjax.distributed._topology import mixing_matrix
from dpjax.distributed._topology import num_components
from dpjax.distributed._topology import ring
from dpjax.distributed._topology import spectral_gap

__all__ = [
    'agent_epsilons',
    'agent_ledgers',
    'agent_mesh',
    'AgentBatch',
    'ALGORITHMS',
    'bits_per_coordinate',
    'calibrate_decentralized',
    'calibrate_distributed_dp',
    'centered',
    'client_encode',
    'client_encode_modular',
    'client_keys',
    'client_sum',
    'complete',
    'conditional_round',
    'cpsgd_bits',
    'cpsgd_event',
    'cpsgd_expected_mse',
    'cpsgd_mse_bound',
    'CpsgdConfig',
    'DecentralizedAlgorithm',
    'DecentralizedPrivacy',
    'DecentralizedState',
    'distributed_dp_bits',
    'distributed_dp_event',
    'distributed_mean',
    'distributed_mean_sharded',
    'DistributedDpConfig',
    'dsgd',
    'erdos_renyi',
    'gaussian_distributed_mean',
    'gaussian_distributed_mean_event',
    'gaussian_protocol_bits',
    'gossip',
    'laplacian',
    'MAX_SKELLAM_MU',
    'mixing_matrix',
    'num_components',
    'pairwise_mask',
    'paper_epsilon',
    'paper_is_upper_bound',
    'paper_rdp_coefficients',
    'Protocol',
    'qdpsgd1',
    'qdpsgd2',
    'qdpsgd2_sensitivities',
    'qdpsgd_event',
    'qdpsgd_step_event',
    'ring',
    'rotated_linf_clip',
    'RoundMetrics',
    'run_agents',
    'run_epsilon',
    'sdm',
    'secure_sum',
    'secure_sum_round',
    'SecureSumRound',
    'server_decode',
    'server_decode_modular',
    'shared_key',
    'spectral_gap',
    'to_modular',
]

# The companions follow the rule <mechanism>_event(..., *, steps=1) and
# <transform>_step_event(what ran, ...): the old names, kept one release.
__getattr__ = _deprecation.deprecated_aliases(__name__, {
    'cpsgd_round_event': 'dpjax.distributed.cpsgd_event',
    'distributed_dp_round_event': 'dpjax.distributed.distributed_dp_event',
    'gaussian_protocol_round_event':
        'dpjax.distributed.gaussian_distributed_mean_event',
    'qdpsgd_round_event': (
        'dpjax.distributed._decentralized_privacy._qdpsgd_round_event',
        'use dpjax.distributed.qdpsgd_step_event(metrics, setting, agent)'),
})
