import torch
raise RuntimeError("boom at import")
