"""
cuTile-specific operator implementations.
"""

try:
    import cuda.tile as ct  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "cuTile backend requires cuda-tile. Install it with `pip install cuda-tile` "
        "or `pip install 'cuda-tile[tileiras]'` to include the optional tileiras compiler. "
        "When installing Liger-Kernel, use `pip install 'liger-kernel[cutile]'` "
        "or `pip install 'liger-kernel[cutile-tileiras]'`."
    ) from exc

from liger_kernel.ops.cutile.ops.cross_entropy import LigerCrossEntropyFunction
from liger_kernel.ops.cutile.ops.cross_entropy import cross_entropy_backward
from liger_kernel.ops.cutile.ops.cross_entropy import cross_entropy_forward
from liger_kernel.ops.cutile.ops.dyt import LigerDyTFunction
from liger_kernel.ops.cutile.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
from liger_kernel.ops.cutile.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
from liger_kernel.ops.cutile.ops.fused_linear_jsd import LigerFusedLinearJSDFunction
from liger_kernel.ops.cutile.ops.fused_linear_jsd import fused_linear_jsd_backward
from liger_kernel.ops.cutile.ops.fused_linear_jsd import fused_linear_jsd_forward
from liger_kernel.ops.cutile.ops.fused_linear_scaled_cross_entropy import LigerFusedLinearScaledCrossEntropyFunction
from liger_kernel.ops.cutile.ops.geglu import LigerGELUMulFunction
from liger_kernel.ops.cutile.ops.geglu import geglu_backward
from liger_kernel.ops.cutile.ops.geglu import geglu_forward
from liger_kernel.ops.cutile.ops.group_norm import LigerGroupNormFunction
from liger_kernel.ops.cutile.ops.group_norm import group_norm_backward
from liger_kernel.ops.cutile.ops.group_norm import group_norm_forward
from liger_kernel.ops.cutile.ops.grpo_loss import GrpoLossFunction
from liger_kernel.ops.cutile.ops.jsd import LigerJSDFunction
from liger_kernel.ops.cutile.ops.jsd import jsd_backward
from liger_kernel.ops.cutile.ops.jsd import jsd_forward
from liger_kernel.ops.cutile.ops.kl_div import LigerKLDivLossFunction
from liger_kernel.ops.cutile.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.cutile.ops.layer_norm import layer_norm_backward
from liger_kernel.ops.cutile.ops.layer_norm import layer_norm_forward
from liger_kernel.ops.cutile.ops.llama4_rope import LigerLlama4RopeFunction
from liger_kernel.ops.cutile.ops.multi_token_attention import LigerMultiTokenAttentionFunction
from liger_kernel.ops.cutile.ops.poly_norm import LigerPolyNormFunction
from liger_kernel.ops.cutile.ops.qwen2vl_mrope import LigerQwen2VLMRopeFunction
from liger_kernel.ops.cutile.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.cutile.ops.rms_norm import rms_norm_backward
from liger_kernel.ops.cutile.ops.rms_norm import rms_norm_forward
from liger_kernel.ops.cutile.ops.rope import LigerRopeFunction
from liger_kernel.ops.cutile.ops.rope import rope_backward
from liger_kernel.ops.cutile.ops.rope import rope_forward
from liger_kernel.ops.cutile.ops.softmax import LigerSoftmaxFunction
from liger_kernel.ops.cutile.ops.sparsemax import LigerSparsemaxFunction
from liger_kernel.ops.cutile.ops.swiglu import LigerSiLUMulFunction
from liger_kernel.ops.cutile.ops.tiled_mlp import LigerTiledMLPFunction
from liger_kernel.ops.cutile.ops.tiled_mlp import apply_tiled_mlp

__all__ = [
    "LigerCrossEntropyFunction",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "LigerDyTFunction",
    "LigerFusedAddRMSNormFunction",
    "LigerFusedLinearCrossEntropyFunction",
    "LigerFusedLinearJSDFunction",
    "fused_linear_jsd_backward",
    "fused_linear_jsd_forward",
    "LigerFusedLinearScaledCrossEntropyFunction",
    "LigerGELUMulFunction",
    "geglu_backward",
    "geglu_forward",
    "LigerGroupNormFunction",
    "GrpoLossFunction",
    "group_norm_backward",
    "group_norm_forward",
    "LigerJSDFunction",
    "jsd_backward",
    "jsd_forward",
    "LigerKLDivLossFunction",
    "LigerLayerNormFunction",
    "layer_norm_backward",
    "layer_norm_forward",
    "LigerLlama4RopeFunction",
    "LigerMultiTokenAttentionFunction",
    "LigerPolyNormFunction",
    "LigerQwen2VLMRopeFunction",
    "LigerRMSNormFunction",
    "rms_norm_backward",
    "rms_norm_forward",
    "LigerRopeFunction",
    "rope_backward",
    "rope_forward",
    "LigerSoftmaxFunction",
    "LigerSparsemaxFunction",
    "LigerSiLUMulFunction",
    "LigerTiledMLPFunction",
    "apply_tiled_mlp",
]
