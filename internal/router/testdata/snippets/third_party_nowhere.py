# tier: heavy
# reason: heavy: imports torch (not in nano nor in any image)
import torch
x = torch.randn(3, 3)
print(x @ x.T)
