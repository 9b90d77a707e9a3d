"""A Triton row softmax (softmax.kernel)."""

from .kernel import softmax

__all__ = ["softmax"]
