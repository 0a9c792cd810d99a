"""Which engine runs a pass, and what is checked about it before anything loads."""

from __future__ import annotations

from ..config import DistillConfig
from ..errors import ConfigError
from ..model.encoder import resolve_device
from ..model.threads import auto_workers
from ..text.corpus import Corpus, TextCorpus
from .base import Engine
from .local import LocalEngine
from .ray.cluster import check_cluster
from .ray.engine import RayEngine
from .serial import SerialEngine


def check_engine(config: DistillConfig) -> None:
    """Before the model loads: the devices exist, or Ray is installed and its address answers."""
    if config.engine == "ray":
        check_cluster(config)
        return
    for device in config.devices:
        resolve_device(device)


def with_workers(config: DistillConfig) -> DistillConfig:
    """``config`` with ``workers="auto"`` made a count for the first device (local engine)."""
    if config.workers is None and config.engine == "local":
        return config.replace(workers=auto_workers(resolve_device(config.devices[0]).type))
    return config


def engine_for(config: DistillConfig, corpus: Corpus | TextCorpus) -> Engine:
    """The engine ``config`` asks for: Ray, worker processes, or this process alone.

    Texts in memory cannot be cut into shards: they run in this process.
    """
    if config.engine == "ray":
        if not isinstance(corpus, Corpus):
            raise ConfigError(
                "the Ray engine reads corpus files; texts in memory need engine='local'",
                field="engine",
            )
        return RayEngine()
    parallel = (config.workers or 1) > 1 or len(config.devices) > 1
    if parallel and isinstance(corpus, Corpus):
        return LocalEngine(config)
    return SerialEngine()
