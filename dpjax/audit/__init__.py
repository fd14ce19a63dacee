"""Attacks on mechanisms: distinguishing audits (an empirical lower bound on
epsilon, with Clopper-Pearson confidence), a registry of audit cases (one per
mechanism, each with a broken twin), one-run audits (a lower bound from a
single training run with random canaries) and gradient reconstruction under
random sparsification.

Example:
  >>> float(dpjax.audit.reconstruction_error_bound(1.0, 0.0, 10.0)) > 0
  True
"""

from dpjax.audit._canaries import dpsgd_gradient_canaries
from dpjax.audit._canaries import dpsgd_input_canaries
from dpjax.audit._registry import audit_case
from dpjax.audit._registry import audit_case_names
from dpjax.audit._registry import audit_cases
from dpjax.audit._cases import AuditCase
from dpjax.audit._distinguishing import AuditResult
from dpjax.audit._distinguishing import clopper_pearson
from dpjax.audit._distinguishing import distinguishing_audit
from dpjax.audit._distinguishing import epsilon_lower_bound
from dpjax.audit._distinguishing import low_bit_score
from dpjax.audit._one_run import count_correct
from dpjax.audit._one_run import one_run_audit
from dpjax.audit._one_run import one_run_epsilon_lower_bound
from dpjax.audit._one_run import one_run_p_value
from dpjax.audit._one_run import OneRunResult
from dpjax.audit._reconstruction import invert_gradients
from dpjax.audit._reconstruction import least_squares_reconstruction
from dpjax.audit._reconstruction import reconstruction_error_bound

__all__ = [
    'audit_case',
    'audit_case_names',
    'audit_cases',
    'AuditCase',
    'AuditResult',
    'clopper_pearson',
    'count_correct',
    'distinguishing_audit',
    'dpsgd_gradient_canaries',
    'dpsgd_input_canaries',
    'epsilon_lower_bound',
    'invert_gradients',
    'least_squares_reconstruction',
    'low_bit_score',
    'one_run_audit',
    'one_run_epsilon_lower_bound',
    'one_run_p_value',
    'OneRunResult',
    'reconstruction_error_bound',
]
