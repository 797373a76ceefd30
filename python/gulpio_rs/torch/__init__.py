"""PyTorch integration: map-style datasets with batched decoding, a collate function that
keeps the decoded batch, a distributed sampler with (elastic) mid-epoch resume, weighted
mixtures of datasets and batches of one shape. See docs/TORCH.md.

Importing this module imports torch (``pip install gulpio-rs[torch]``); ``import gulpio_rs``
alone never does.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        "gulpio_rs.torch needs PyTorch: pip install 'gulpio-rs[torch]' (or pip install torch)"
    ) from exc

from ._buckets import GulpBucketBatchSampler, bucket_keys
from ._collate import MixedShapesError, gulp_collate
from ._geometry import sample_crop
from ._image import GulpImageDataset
from ._mixture import GulpMixture
from ._sampler import GulpDistributedSampler, shuffled_positions
from ._sampling import sample_frame_indices, sample_time_indices
from ._video import GulpVideoDataset

__all__ = [
    "GulpVideoDataset",
    "GulpImageDataset",
    "gulp_collate",
    "MixedShapesError",
    "GulpDistributedSampler",
    "GulpMixture",
    "GulpBucketBatchSampler",
    "bucket_keys",
    "sample_frame_indices",
    "sample_time_indices",
    "sample_crop",
    "shuffled_positions",
]

# Defined in submodules, public here: their module is this one (as in gulpio_rs.adapters), so
# pickles (DataLoader workers started with spawn, saved datasets and samplers) and reprs name
# ``gulpio_rs.torch.<name>`` whichever file defines it.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
