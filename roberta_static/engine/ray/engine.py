"""The Ray engine: shard tasks on the cluster's CPUs feed encoders, one loop drives both.

The encoders are actors on the cluster (one per GPU, or ``encoders`` on CPUs), except on a
cluster of this machine alone without a GPU and without ``encoders``: there an actor would be a
second process holding torch and a copy of the model, so the driver encodes, as one process does.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from ...model.threads import torch_threads
from ...progress import ProgressCallback
from ...stopping import Checkpointing
from ..base import Job
from ..encoders import encoder_threads
from ..loop import run_pass
from ..producer import ProducerSetup
from ..state import PassState
from .actors import RayEncoders, model_parts
from .cluster import check_cluster, connected
from .tasks import RayFeeder


class RayEngine:
    """A pass on a Ray cluster, joined (or started on this machine) for the run."""

    def start(self, stopping: Checkpointing | None) -> AbstractContextManager[None]:
        """See :class:`~..base.Engine`: nothing to start before the model loads."""
        return nullcontext()

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """See :class:`~..base.Engine`."""
        config = job.config
        ray = check_cluster(config)
        with connected(ray, config.ray_address, stopping):
            slots = config.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            feeder = RayFeeder(
                ray, ProducerSetup.of(job.encoder, job.corpus, job.patterns, config), slots
            )
            if config.encoders is None and _this_machine_without_gpus(ray):
                pool, on_cpu = encoder_threads(job)
                threads: AbstractContextManager[Any] = torch_threads(on_cpu, cores_taken=slots)
            else:
                pool, threads = _actors(ray, job), nullcontext()
            try:
                with threads:
                    return run_pass(job, feeder, pool, resume, stopping, progress, sharded=True)
            finally:
                feeder.close()


def _actors(ray: Any, job: Job) -> Callable[[object], RayEncoders]:
    """The pool of encoder actors, sent the model and tokenizer through the object store."""
    model = ray.put((*model_parts(job.model), job.tokenizer))

    def pool(stopping: object) -> RayEncoders:
        return RayEncoders(ray, model, job.config, len(job.vocab), job.dim, job.targets)

    return pool


def _this_machine_without_gpus(ray: Any) -> bool:
    """Whether every node of the cluster is the driver's, and none has a GPU."""
    here = ray.get_runtime_context().get_node_id()
    nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    return nodes == {here} and not ray.cluster_resources().get("GPU")
