"""The audit-case registry: every case by name, built on first use.

Example:
  >>> names = [c.name for c in audit_cases()]
  >>> 'gaussian' in names and 'cpsgd_binomial' in names
  True
"""

import functools
from typing import Callable

from dpjax.audit import _cases_adaptive
from dpjax.audit import _cases_bandmf
from dpjax.audit import _cases_distributed
from dpjax.audit import _cases_exact_gaussian
from dpjax.audit import _cases_ghost
from dpjax.audit import _cases_leaks
from dpjax.audit import _cases_lowbits
from dpjax.audit import _cases_microbatch
from dpjax.audit import _cases_participation
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import compressive_case
from dpjax.audit._cases import discrete_gaussian_case
from dpjax.audit._cases import dp_compgd_case
from dpjax.audit._cases import dp_knn_case
from dpjax.audit._cases import dpsgd_ghost_case
from dpjax.audit._cases import dpsgd_vmap_case
from dpjax.audit._cases import exponential_case
from dpjax.audit._cases import gaussian_case
from dpjax.audit._cases import laplace_case
from dpjax.audit._cases import laplace_privatizer_case
from dpjax.audit._cases import noisy_reg_case
from dpjax.audit._cases import random_trees_case
from dpjax.audit._cases import rs_dpsgd_case


def _builders() -> dict[str, Callable[[], AuditCase]]:
  return {'gaussian': gaussian_case, 'laplace': laplace_case,
          'discrete_gaussian': discrete_gaussian_case,
          'exponential': exponential_case, 'dp_knn': dp_knn_case,
          'noisy_reg': noisy_reg_case, 'random_trees': random_trees_case,
          'private_histogram': _cases_lowbits.private_histogram_case,
          'dpsgd_vmap': dpsgd_vmap_case, 'dpsgd_ghost': dpsgd_ghost_case,
          'dpsgd_ghost_gather': _cases_ghost.dpsgd_ghost_gather_case,
          'rs_dpsgd': rs_dpsgd_case, 'dp_compgd': dp_compgd_case,
          'laplace_privatizer': laplace_privatizer_case,
          'compressive': compressive_case,
          'exact_gaussian': _cases_exact_gaussian.exact_gaussian_case,
          'adaptive_dpsgd': _cases_adaptive.adaptive_dpsgd_case,
          'user_dpsgd': _cases_adaptive.user_dpsgd_case,
          'bandmf': _cases_bandmf.bandmf_case,
          **_cases_distributed.distributed_builders(),
          # Appended: a case's index seeds its audit in the experiment.
          'user_level_unit': _cases_leaks.user_level_unit_case,
          'scaled_clipped_sum': _cases_leaks.scaled_clipped_sum_case,
          'shared_noise_key': _cases_leaks.shared_noise_key_case,
          'adaptive_bandmf_count': _cases_leaks.adaptive_bandmf_count_case,
          'reshuffled_epochs_bandmf':
              _cases_participation.reshuffled_epochs_bandmf_case,
          'restarted_cyclic_step':
              _cases_participation.restarted_cyclic_step_case,
          'dpsgd_microbatch': _cases_microbatch.dpsgd_microbatch_case}


def audit_case_names() -> tuple[str, ...]:
  """The names of the registered audit cases, without building any.

  Example:
    >>> audit_case_names()[:3]
    ('gaussian', 'laplace', 'discrete_gaussian')
  """
  return tuple(_builders())


@functools.lru_cache(maxsize=None)
def audit_case(name: str) -> AuditCase:
  """The audit case called ``name``, built once per process.

  Building runs the case's accountant and draws its data, so a test
  parametrized by ``audit_case_names()`` builds only the cases it runs.

  Example:
    >>> audit_case('laplace').relation
    'add/remove'
  """
  builders = _builders()
  if name not in builders:
    raise ValueError(f'name: no audit case {name!r}; the cases are '
                     f'{", ".join(builders)}')
  case = builders[name]()
  assert case.name == name, (case.name, name)
  return case


@functools.lru_cache(maxsize=1)
def audit_cases() -> tuple[AuditCase, ...]:
  """Every registered audit case (central mechanisms, protocols, leaks,
  participation patterns).

  Built once per process (the stated epsilons run the accountants).

  Example:
    >>> case = audit_cases()[0]
    >>> case.name, case.relation, case.broken is not None
    ('gaussian', 'add/remove', True)
  """
  return tuple(audit_case(name) for name in audit_case_names())
