"""Private non-parametric releases: histograms, kNN, tree ensembles.

Releases that are not gradient steps. Each is a function ``f(key, x, y, *,
epsilon, bounds, ...) -> (release, event)``: ``release`` is a pytree that a
separate pure ``predict(release, x)`` reads, and ``event`` is the
``DpEvent`` a ``PrivacyLedger`` records (pure DP, or (epsilon, delta) where
the exponential mechanism's float noise adds a delta). Feature bounds are a
public input: data are clipped to them (``to_unit_cube``), never scaled by
the range of the private data; ``dp_bounds`` spends budget when no
public bounds exist.
The exponential mechanism is here as a general primitive.

Example:
  >>> idx = dpjax.nonparametric.exponential_mechanism(
  ...     jax.random.key(0), jnp.array([0.0, 100.0]), epsilon=1.0,
  ...     sensitivity=1.0)
  >>> int(idx)
  1
"""

from dpjax.nonparametric._bounds import check_bounds
from dpjax.nonparametric._bounds import check_features
from dpjax.nonparametric._bounds import check_labels
from dpjax.nonparametric._bounds import dp_bounds
from dpjax.nonparametric._bounds import to_unit_cube
from dpjax.nonparametric._cells import jl_projection
from dpjax.nonparametric._ensembles import pte
from dpjax.nonparametric._ensembles import spe
from dpjax.nonparametric._ensembles import sspe
from dpjax.nonparametric._exponential import exponential_mechanism
from dpjax.nonparametric._exponential import exponential_mechanism_delta
from dpjax.nonparametric._histogram import HistogramRelease
from dpjax.nonparametric._histogram import NoisyRegRelease
from dpjax.nonparametric._histogram import DpHistogramRelease
from dpjax.nonparametric._histogram import histogram
from dpjax.nonparametric._histogram import noisy_reg
from dpjax.nonparametric._histogram import dp_histogram
from dpjax.nonparametric._knn import DpKnnRelease
from dpjax.nonparametric._knn import dp_knn
from dpjax.nonparametric._predict import predict
from dpjax.nonparametric._random_trees import RandomTreesRelease
from dpjax.nonparametric._random_trees import random_decision_trees
from dpjax.nonparametric._trees import TreeEnsemble
from dpjax.nonparametric._trees import depth_budgets

__all__ = [
    'check_bounds',
    'check_features',
    'check_labels',
    'depth_budgets',
    'dp_bounds',
    'dp_histogram',
    'dp_knn',
    'DpHistogramRelease',
    'DpKnnRelease',
    'exponential_mechanism',
    'exponential_mechanism_delta',
    'histogram',
    'HistogramRelease',
    'jl_projection',
    'noisy_reg',
    'NoisyRegRelease',
    'predict',
    'pte',
    'random_decision_trees',
    'RandomTreesRelease',
    'spe',
    'sspe',
    'to_unit_cube',
    'TreeEnsemble',
]
