"""Experiments for dpjax: the DP-SGD demo (``python -m experiments``) and benchmarks."""

from experiments import compilation_cache as _compilation_cache

# Before any experiment or benchmark imports JAX: reuse compiled programs.
_compilation_cache.configure()
