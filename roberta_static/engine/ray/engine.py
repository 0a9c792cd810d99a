"""The Ray engine: shard tasks on the cluster's CPUs feed encoder actors, one loop drives both."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from ...progress import ProgressCallback
from ...stopping import Checkpointing
from ..base import Job
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
            model = ray.put((*model_parts(job.model), job.tokenizer))

            def pool(stopping: object) -> RayEncoders:
                return RayEncoders(ray, model, config, len(job.vocab), job.dim, job.targets)

            try:
                return run_pass(job, feeder, pool, resume, stopping, progress, sharded=True)
            finally:
                feeder.close()
