"""Experiments for dpjax: the DP-SGD demo (``python -m experiments``) and benchmarks."""
