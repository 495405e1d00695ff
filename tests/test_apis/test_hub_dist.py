"""``mmtnt://NAME`` under torchrun: on a cold cache one rank downloads and
converts, the other waits for its file (the cache entry's file lock)."""
import json
import subprocess
import sys
from pathlib import Path

import torch
from equivalence import max_relative_error
from test_hub import TNT_URL, TOLERANCE, cached_files, serve_tnt

from mmtnt import hub

RANK_SCRIPT = Path(__file__).with_name('hub_dist_rank.py')
# Long enough that, without the lock, the second rank's request arrives
# while the first one's is still answered.
SLOW_ANSWER_S = 1.0


def test_two_ranks_download_once(weights_server, model_index, tmp_path):
    """Two gloo ranks load one cold ``mmtnt://`` name together from a slow
    server: exactly one request reaches the file, and both ranks' logits
    equal timm's."""
    source = serve_tnt(weights_server, model_index)
    weights_server.delay = SLOW_ANSWER_S
    index_file = tmp_path / 'index.json'
    index_file.write_text(json.dumps({'tnt-tiny': model_index['tnt-tiny']}))
    images = torch.randn(2, 3, 32, 32,
                         generator=torch.Generator().manual_seed(0))
    torch.save(images, tmp_path / 'images.pth')

    command = [
        sys.executable, '-m', 'torch.distributed.run', '--standalone',
        '--nproc-per-node', '2', RANK_SCRIPT, index_file,
        tmp_path / 'images.pth', tmp_path
    ]
    result = subprocess.run([str(arg) for arg in command],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-5000:]

    assert weights_server.requests == {'/' + TNT_URL.split('://')[1]: 1}
    with torch.no_grad():
        expected = source(images)
    for rank in range(2):
        logits = torch.load(tmp_path / f'rank{rank}.pth')
        error = max_relative_error(logits, expected)
        assert error < TOLERANCE, (rank, error)
    cached = Path(hub.cache_file(*hub.resolve('tnt-tiny')))
    assert cached_files(cached.parent) == [cached.with_suffix('.json'),
                                           cached]
