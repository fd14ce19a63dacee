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

from dpjax.distributed.decentralized._rounds import ALGORITHMS
from dpjax.distributed.decentralized._rounds import AgentBatch
from dpjax.distributed.decentralized._rounds import CLIP_METHODS
from dpjax.distributed.decentralized._rounds import DecentralizedAlgorithm
from dpjax.distributed.decentralized._rounds import DecentralizedState
from dpjax.distributed.decentralized._rounds import RoundMetrics
from dpjax.distributed.decentralized._qdpsgd import qdpsgd1
from dpjax.distributed.decentralized._qdpsgd import qdpsgd2
from dpjax.distributed.decentralized._baselines import dsgd
from dpjax.distributed.decentralized._baselines import sdm
from dpjax.distributed.decentralized._privacy import DecentralizedPrivacy
from dpjax.distributed.decentralized._privacy import agent_epsilons
from dpjax.distributed.decentralized._privacy import agent_ledgers
from dpjax.distributed.decentralized._privacy import calibrate_decentralized
from dpjax.distributed.decentralized._privacy import paper_epsilon
from dpjax.distributed.decentralized._privacy import paper_is_upper_bound
from dpjax.distributed.decentralized._privacy import paper_rdp_coefficients
from dpjax.distributed.decentralized._privacy import qdpsgd2_sensitivities
from dpjax.distributed.decentralized._privacy import qdpsgd_event
from dpjax.distributed.decentralized._privacy import qdpsgd_step_event
from dpjax.distributed.decentralized._privacy import run_epsilon
from dpjax.distributed.decentralized._gossip import agent_mesh
from dpjax.distributed.decentralized._gossip import gossip
from dpjax.distributed.decentralized._gossip import run_agents
from dpjax.distributed.decentralized._topology import complete
from dpjax.distributed.decentralized._topology import erdos_renyi
from dpjax.distributed.decentralized._topology import laplacian
from dpjax.distributed.decentralized._topology import mixing_matrix
from dpjax.distributed.decentralized._topology import num_components
from dpjax.distributed.decentralized._topology import ring
from dpjax.distributed.decentralized._topology import spectral_gap

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
