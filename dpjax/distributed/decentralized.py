"""Decentralized agents: gossip over a graph, no server (Q-DPSGD and kin).

Gossip graphs (``erdos_renyi``, ``ring``, ``complete``) and their mixing
matrices (``mixing_matrix``, ``spectral_gap``); ``gossip`` and the agent
harness ``run_agents`` (vmapped, or sharded over a mesh axis
bit-identically); the algorithms ``qdpsgd1``, ``qdpsgd2`` (Ding et al.,
Q-DPSGD), ``dsgd`` and ``sdm`` as jitted rounds over all agents; and their
per-agent accounting (``agent_ledgers``, ``run_epsilon``,
``calibrate_decentralized``, the paper's Theorems 1 and 5 in
``paper_epsilon`` beside the sound bound): ``qdpsgd_event`` from the
hyperparameters, ``qdpsgd_step_event`` read from the metrics of the round
that ran. Every name here is also exported by ``dpjax.distributed``.

Example:
  >>> w = dpjax.distributed.decentralized.mixing_matrix(
  ...     dpjax.distributed.decentralized.ring(4))
  >>> w.shape, bool(jnp.allclose(w.sum(axis=1), 1.0))
  ((4, 4), True)
"""

from dpjax.distributed._decentralized import ALGORITHMS
from dpjax.distributed._decentralized import AgentBatch
from dpjax.distributed._decentralized import CLIP_METHODS
from dpjax.distributed._decentralized import DecentralizedAlgorithm
from dpjax.distributed._decentralized import DecentralizedState
from dpjax.distributed._decentralized import RoundMetrics
from dpjax.distributed._decentralized import qdpsgd1
from dpjax.distributed._decentralized import qdpsgd2
from dpjax.distributed._decentralized_baselines import dsgd
from dpjax.distributed._decentralized_baselines import sdm
from dpjax.distributed._decentralized_privacy import DecentralizedPrivacy
from dpjax.distributed._decentralized_privacy import agent_epsilons
from dpjax.distributed._decentralized_privacy import agent_ledgers
from dpjax.distributed._decentralized_privacy import calibrate_decentralized
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
    'calibrate_decentralized',
    'CLIP_METHODS',
    'complete',
    'DecentralizedAlgorithm',
    'DecentralizedPrivacy',
    'DecentralizedState',
    'dsgd',
    'erdos_renyi',
    'gossip',
    'laplacian',
    'mixing_matrix',
    'num_components',
    'paper_epsilon',
    'paper_is_upper_bound',
    'paper_rdp_coefficients',
    'qdpsgd1',
    'qdpsgd2',
    'qdpsgd2_sensitivities',
    'qdpsgd_event',
    'qdpsgd_step_event',
    'ring',
    'RoundMetrics',
    'run_agents',
    'run_epsilon',
    'sdm',
    'spectral_gap',
]
