"""A batch's host arrays on the encoder's device: on CUDA in one copy from reused pinned memory."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

_BUFFERS = 2  # a batch is staged while the previous one's copy may still be in flight


class Staging:
    """Moves integer host arrays to one device.

    On the CPU the tensors share the arrays' memory: nothing is copied or pinned. On CUDA the
    arrays are packed into one of two page-locked (pinned) int64 buffers, kept and grown as
    batches need, and sent in one asynchronous copy; a buffer is written again only once its
    previous copy has completed (an event recorded after each copy), so a copy never reads a
    buffer being refilled. Other devices (MPS) get one plain copy per array.

    Args:
        device: Where the tensors go.

    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._buffers: list[torch.Tensor | None] = [None] * _BUFFERS
        self._copied: list[torch.cuda.Event | None] = [None] * _BUFFERS
        self._turn = 0

    def move(self, arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
        """The arrays as tensors on the device, in order (int64 on CUDA)."""
        if self.device.type == "cpu":
            return [torch.from_numpy(array) for array in arrays]
        if self.device.type != "cuda":
            return [torch.from_numpy(array).to(self.device) for array in arrays]
        return self._through_pinned(arrays)

    def _through_pinned(self, arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
        sizes = [array.size for array in arrays]
        turn, self._turn = self._turn, (self._turn + 1) % _BUFFERS
        buffer = self._buffer(turn, sum(sizes))
        host = buffer.numpy()
        offset = 0
        for array, size in zip(arrays, sizes, strict=True):
            host[offset : offset + size] = array.reshape(-1)
            offset += size
        packed = buffer[:offset].to(self.device, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record(torch.cuda.current_stream(self.device))
        self._copied[turn] = copied
        parts = packed.split(sizes)
        return [part.view(array.shape) for part, array in zip(parts, arrays, strict=True)]

    def _buffer(self, turn: int, size: int) -> torch.Tensor:
        """Buffer ``turn``, once its last copy is done, grown to hold ``size`` values."""
        copied = self._copied[turn]
        if copied is not None:
            # The copy of two batches ago: done by now unless the host runs that far ahead.
            copied.synchronize()
        buffer = self._buffers[turn]
        if buffer is None or buffer.numel() < size:
            capacity = max(size, 2 * buffer.numel() if buffer is not None else 0)
            buffer = torch.empty(capacity, dtype=torch.int64, pin_memory=True)
            self._buffers[turn] = buffer
        return buffer
