"""Private fine-tuning: low-rank adapters whose gradients alone are private.

``LoRADense`` is a Dense layer with a frozen pretrained kernel (and bias) in
the ``FROZEN`` collection and trainable low-rank factors A, B in ``params``
(Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large Language Models").
DP-SGD runs on ``params`` only; the per-example loss closes over the frozen
tree, so the frozen weights get no gradient, no clip and no noise, and the
noise dimension (and ``dpjax.transforms.dpsgd_bits``) is the adapter size.
The recipe is in docs/finetune.md.

Example:
  >>> model = LoRADense(3, rank=2)
  >>> variables = model.init(jax.random.key(0), jnp.ones((1, 4)))
  >>> jax.tree.map(jnp.shape, variables['params'])
  {'lora_a': (4, 2), 'lora_b': (2, 3)}
  >>> sorted(variables[FROZEN])
  ['bias', 'kernel']
"""

from dpjax.finetune._lora import FROZEN
from dpjax.finetune._lora import LoRADense

__all__ = [
    'FROZEN',
    'LoRADense',
]
