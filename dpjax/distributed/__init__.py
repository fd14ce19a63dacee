"""Protocols over many clients, and decentralized agents, in two parts.

``dpjax.distributed.protocols``: client protocols (cpSGD, the distributed
discrete Gaussian and Skellam protocols over a modular secure sum, the
Gaussian baseline, a plain mean), each with its encoder, its server-side
decoder, its event and its bits behind one ``Protocol`` type, on one client
harness (``shared_key``, ``client_keys``, ``client_sum``).

``dpjax.distributed.decentralized``: agents that gossip over a graph with
no server (gossip graphs and mixing matrices, the agent harness, Q-DPSGD,
DSGD, SDM, and their per-agent accounting).

This namespace exports the names of both parts.

Example:
  >>> cfg = dpjax.distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16,
  ...                                     trials=32)
  >>> xs = jnp.ones((4, 3)) / 2
  >>> dpjax.distributed.distributed_mean(cfg, jax.random.key(0), xs).shape
  (3,)
"""

from dpjax.distributed.decentralized import ALGORITHMS
from dpjax.distributed.decentralized import AgentBatch
from dpjax.distributed.decentralized import CLIP_METHODS
from dpjax.distributed.decentralized import DecentralizedAlgorithm
from dpjax.distributed.decentralized import DecentralizedPrivacy
from dpjax.distributed.decentralized import DecentralizedState
from dpjax.distributed.decentralized import RoundMetrics
from dpjax.distributed.decentralized import agent_epsilons
from dpjax.distributed.decentralized import agent_ledgers
from dpjax.distributed.decentralized import agent_mesh
from dpjax.distributed.decentralized import calibrate_decentralized
from dpjax.distributed.decentralized import complete
from dpjax.distributed.decentralized import dsgd
from dpjax.distributed.decentralized import erdos_renyi
from dpjax.distributed.decentralized import gossip
from dpjax.distributed.decentralized import laplacian
from dpjax.distributed.decentralized import mixing_matrix
from dpjax.distributed.decentralized import num_components
from dpjax.distributed.decentralized import paper_epsilon
from dpjax.distributed.decentralized import paper_is_upper_bound
from dpjax.distributed.decentralized import paper_rdp_coefficients
from dpjax.distributed.decentralized import qdpsgd1
from dpjax.distributed.decentralized import qdpsgd2
from dpjax.distributed.decentralized import qdpsgd2_sensitivities
from dpjax.distributed.decentralized import qdpsgd_event
from dpjax.distributed.decentralized import qdpsgd_step_event
from dpjax.distributed.decentralized import ring
from dpjax.distributed.decentralized import run_agents
from dpjax.distributed.decentralized import run_epsilon
from dpjax.distributed.decentralized import sdm
from dpjax.distributed.decentralized import spectral_gap
from dpjax.distributed.protocols import CpsgdConfig
from dpjax.distributed.protocols import DistributedDpConfig
from dpjax.distributed.protocols import MAX_SKELLAM_MU
from dpjax.distributed.protocols import Protocol
from dpjax.distributed.protocols import SecureSumRound
from dpjax.distributed.protocols import bits_per_coordinate
from dpjax.distributed.protocols import calibrate_distributed_dp
from dpjax.distributed.protocols import centered
from dpjax.distributed.protocols import client_encode
from dpjax.distributed.protocols import client_encode_modular
from dpjax.distributed.protocols import client_keys
from dpjax.distributed.protocols import client_sum
from dpjax.distributed.protocols import conditional_round
from dpjax.distributed.protocols import cpsgd_bits
from dpjax.distributed.protocols import cpsgd_event
from dpjax.distributed.protocols import cpsgd_expected_mse
from dpjax.distributed.protocols import cpsgd_mse_bound
from dpjax.distributed.protocols import cpsgd_protocol
from dpjax.distributed.protocols import distributed_dp_bits
from dpjax.distributed.protocols import distributed_dp_event
from dpjax.distributed.protocols import distributed_dp_protocol
from dpjax.distributed.protocols import distributed_mean
from dpjax.distributed.protocols import distributed_mean_sharded
from dpjax.distributed.protocols import gaussian_distributed_mean
from dpjax.distributed.protocols import gaussian_distributed_mean_protocol
from dpjax.distributed.protocols import gaussian_protocol_bits
from dpjax.distributed.protocols import pairwise_mask
from dpjax.distributed.protocols import plain_mean_protocol
from dpjax.distributed.protocols import rotated_linf_clip
from dpjax.distributed.protocols import secure_sum
from dpjax.distributed.protocols import secure_sum_round
from dpjax.distributed.protocols import server_decode
from dpjax.distributed.protocols import server_decode_modular
from dpjax.distributed.protocols import shared_key
from dpjax.distributed.protocols import to_modular

from dpjax.distributed import decentralized  # noqa: E402  (the parts)
from dpjax.distributed import protocols  # noqa: E402

# Every public name of the two parts, sorted as the other packages' lists.
__all__ = sorted(set(protocols.__all__) | set(decentralized.__all__),
                 key=str.lower)
