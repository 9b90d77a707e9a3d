import torch
x = torch.randn(1 << 20, device="cuda")
def call(n):
    y = x[:n] * 2
    return torch.cumsum(y, 0)
x.add_(1)
torch.cuda.synchronize()
for n in (1024, 4096):
    name = f"kopt:n={n}"
    for _ in range(4):
        torch.cuda.nvtx.range_push(name); call(n); torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push(name); torch.cuda.nvtx.range_push("inner_region")
    call(n)
    torch.cuda.nvtx.range_pop(); torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
