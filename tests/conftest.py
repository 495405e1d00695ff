import os
import sys

import torch

# Tests run the helpers next to them (``equivalence``) as plain modules.
sys.path.insert(0, os.path.dirname(__file__))
# Keep timings comparable and runs reproducible on the 2-core CI machine.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
