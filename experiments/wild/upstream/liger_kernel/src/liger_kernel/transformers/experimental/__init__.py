from liger_kernel.transformers.experimental.embedding import LigerEmbedding  # noqa: F401

__all__ = [
    "LigerEmbedding",
]
