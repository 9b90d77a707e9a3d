"""softmax against torch.softmax (on a machine without a GPU: TRITON_INTERPRET=1 pytest)."""

import pytest
import torch
from softmax import softmax

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {torch.float32: (1e-6, 1e-5), torch.float16: (1e-5, 1e-3), torch.bfloat16: (1e-4, 8e-3)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 64), (3, 100), (2, 5, 33), (1, 1), (7, 256)])
def test_matches_torch(shape, dtype):
    torch.manual_seed(0)
    x = (torch.randn(shape, device=DEVICE) * 4).to(dtype)
    got = softmax(x)
    want = torch.softmax(x.double(), dim=-1)
    atol, rtol = TOL[dtype]
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got.double(), want, atol=atol, rtol=rtol)


def test_rows_sum_to_one_and_large_values_do_not_overflow():
    x = torch.tensor([[1000.0, 1000.0, -1000.0, 0.0]], device=DEVICE)
    y = softmax(x)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.sum(-1), torch.ones(1, device=DEVICE))
