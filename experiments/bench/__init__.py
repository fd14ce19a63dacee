"""The benchmarks (not tests): ``python -m experiments bench NAME|all|list``.

Every benchmark is a module of this package with ``main(argv)`` and a
``QUICK`` string, its smallest setting (``bench all --quick`` and the harness
check run it), registered in ``experiments.registry.BENCHMARKS``. The other
modules are shared helpers: ``cli`` (the ``bench`` command), ``timing``
(interleaved medians over passes, load average, machine/versions/threads
header, compiled memory), and the DP-SGD benchmark's parts (``dpsgd_cli``,
``dpsgd_steps``, ``dpsgd_torch``, ``dpsgd_table``, ``models``). Importing this
package imports neither JAX nor PyTorch.
"""
