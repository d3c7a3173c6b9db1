"""The lab's scenarios: one per cause of the catalogue, healthy controls, and held-out variants."""

from __future__ import annotations

from tritonguard.lab.loadgen import LoadSpec, Segment
from tritonguard.lab.repository import Behaviour, DynamicBatching, ModelSpec
from tritonguard.lab.scenario_runner import Action, LabRun, Load, Scenario

LEDGER = "{ledger}"
LOCK = "{lock}"


def deploy(spec: ModelSpec) -> Action:
    """Onset: deploy ``spec`` through the repository API."""

    async def action(run: LabRun) -> None:
        await run.deploy(spec)

    return action


def hog(workers: int, autogroup_nice: int) -> Action:
    """Onset: a CPU-hungry neighbour starts on the node."""

    async def action(run: LabRun) -> None:
        run.start_hog(workers, autogroup_nice)

    return action


def rewrites(spec: ModelSpec, every_s: float, *, atomic: bool) -> Action:
    """Onset: a deploy job starts rewriting the polled repository periodically."""

    async def action(run: LabRun) -> None:
        run.rewrite_periodically(spec, every_s, atomic=atomic)

    return action


def _open(
    model: str, shape: tuple[int, ...], duration: float, *segments: Segment, **kw: object
) -> LoadSpec:
    # kw are LoadSpec's own optional fields (timeout_s, retries, ...): the dataclass checks
    # their names when it is built, which the untyped pass-through cannot show mypy.
    return LoadSpec(model=model, shape=shape, schedule=tuple(segments), duration_s=duration, **kw)  # type: ignore[arg-type]  # see above


def _batching_delay(
    name: str,
    model: str,
    *,
    rate: float,
    delay_us: int,
    max_batch: int,
    client_batch: int,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    before = ModelSpec(
        model,
        max_batch_size=max_batch,
        input_dims=(32,),
        dynamic_batching=DynamicBatching(500, (2, 4)),
        behaviour=Behaviour(accel_ms=6, accel_ms_per_item=0.4, ledger_dir=LEDGER),
    )
    after = before.with_(dynamic_batching=DynamicBatching(delay_us, (max_batch,)))
    total = base + fault
    return Scenario(
        name,
        "batching_delay",
        model,
        (before,),
        (Load(_open(model, (client_batch, 32), total, Segment(0, rate), burstiness=3, seed=11)),),
        onset=deploy(after),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="search",
        pod=f"{model}-0",
        accel_share=0.5,
        notes=f"Deploy raises max_queue_delay_microseconds 500 -> {delay_us} with preferred batch "
        f"{max_batch}; erratic traffic of {rate}/s (bursts of up to 3, client batch "
        f"{client_batch}) "
        "never fills a batch, so requests wait out the delay.",
        params={
            "rate": rate,
            "max_queue_delay_us": delay_us,
            "max_batch_size": max_batch,
            "client_batch": client_batch,
        },
    )


def _too_few(
    name: str,
    model: str,
    *,
    accel_ms: float,
    base_rate: float,
    fault_rate: float,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=4,
        input_dims=(16,),
        behaviour=Behaviour(accel_ms=accel_ms, ledger_dir=LEDGER),
    )
    total = base + fault
    load = _open(
        model,
        (1, 16),
        total,
        Segment(0, base_rate),
        Segment(base, base_rate, fault_rate),
        Segment(base + 10, fault_rate),
        seed=21,
    )
    return Scenario(
        name,
        "too_few_instances",
        model,
        (spec,),
        (Load(load),),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="vision",
        pod=f"{model}-0",
        accel_share=0.35,
        notes=f"One instance ({accel_ms} ms per execution, no dynamic batching: capacity "
        f"{1000 / accel_ms:.0f}/s); traffic rises {base_rate} -> {fault_rate}/s at onset "
        "over 10 s.",
        params={
            "accel_ms": accel_ms,
            "instances": 1,
            "base_rate": base_rate,
            "fault_rate": fault_rate,
        },
    )


def _too_few_deploy(name: str, model: str, *, scrape: float, base: float, fault: float) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=4,
        input_dims=(16,),
        instance_count=3,
        behaviour=Behaviour(accel_ms=60, ledger_dir=LEDGER),
    )
    rate = 21.0
    return Scenario(
        name,
        "too_few_instances",
        model,
        (spec,),
        (Load(_open(model, (1, 16), base + fault, Segment(0, rate), seed=22)),),
        onset=deploy(spec.with_(instance_count=1)),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="vision",
        pod=f"{model}-0",
        accel_share=0.3,
        notes="Deploy drops instance_group count 3 -> 1 (60 ms per execution, capacity 16.7/s) "
        f"under a steady {rate}/s.",
        params={"accel_ms": 60, "instances_before": 3, "instances_after": 1, "rate": rate},
    )


def _too_many(
    name: str,
    model: str,
    *,
    before: int,
    after: int,
    rate: float,
    accel_ms: float,
    per_item_ms: float,
    switch_ms: float,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=8,
        input_dims=(16,),
        instance_count=before,
        dynamic_batching=DynamicBatching(2000, (4, 8)),
        behaviour=Behaviour(
            accel_ms=accel_ms,
            accel_ms_per_item=per_item_ms,
            accel_lock=LOCK,
            switch_ms=switch_ms,
            ledger_dir=LEDGER,
        ),
    )
    return Scenario(
        name,
        "too_many_instances",
        model,
        (spec,),
        (Load(_open(model, (1, 16), base + fault, Segment(0, rate), seed=31)),),
        onset=deploy(spec.with_(instance_count=after)),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="vision",
        pod=f"{model}-0",
        accel_share=1.0,
        notes=f"All instances share one accelerator (a file lock; {switch_ms} ms to switch "
        "holders). "
        f"Deploy raises instance count {before} -> {after} at a steady {rate}/s: instances take "
        "smaller batches and wait for the device, so compute per inference inflates.",
        params={
            "instances_before": before,
            "instances_after": after,
            "rate": rate,
            "accel_ms": accel_ms,
            "accel_ms_per_item": per_item_ms,
            "switch_ms": switch_ms,
        },
    )


def _cold(
    name: str,
    model: str,
    cause: str | None,
    *,
    warmup: int,
    cold_execs: int,
    cold_ms: float,
    decay: float,
    rate: float,
    instances: int,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    v1 = ModelSpec(
        model,
        max_batch_size=8,
        input_dims=(16,),
        instance_count=instances,
        dynamic_batching=DynamicBatching(1000, (4, 8)),
        behaviour=Behaviour(accel_ms=10, accel_ms_per_item=0.5, ledger_dir=LEDGER),
    )
    v2 = v1.with_(
        version=2,
        warmup_count=warmup,
        behaviour=Behaviour(
            accel_ms=10,
            accel_ms_per_item=0.5,
            cold_execs=cold_execs,
            cold_ms=cold_ms,
            cold_decay=decay,
            ledger_dir=LEDGER,
        ),
    )
    what = f"with model_warmup (count {warmup})" if warmup else "without model_warmup"
    return Scenario(
        name,
        cause,
        model,
        (v1,),
        (Load(_open(model, (1, 16), base + fault, Segment(0, rate), seed=41)),),
        onset=deploy(v2),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="ml",
        pod=f"{model}-0",
        accel_share=0.4,
        notes=f"Deploy of version 2 {what} at a steady {rate}/s; its first {cold_execs} executions "
        f"per instance take +{cold_ms} ms x {decay}^n.",
        params={
            "warmup": warmup,
            "cold_execs": cold_execs,
            "cold_ms": cold_ms,
            "cold_decay": decay,
            "rate": rate,
            "instances": instances,
        },
    )


def _cpu(
    name: str,
    model: str,
    *,
    instances: int,
    cpu_mb: float,
    start: float,
    end: float,
    quota: float,
    max_batch: int,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=max_batch,
        input_dims=(16,),
        instance_count=instances,
        dynamic_batching=DynamicBatching(1000, (max_batch,)),
        behaviour=Behaviour(accel_ms=3, cpu_bytes_per_item=int(cpu_mb * 1e6), ledger_dir=LEDGER),
    )
    # The ramp reaches its peak a third into the fault phase and holds it, so the CPU
    # saturates early enough for the fault to be seen, as a sudden traffic shift would.
    load = _open(
        model,
        (1, 16),
        base + fault,
        Segment(0, start),
        Segment(base, start, end),
        Segment(base + fault / 3, end),
        seed=51,
    )
    return Scenario(
        name,
        "cpu_bottleneck",
        model,
        (spec,),
        (Load(load),),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="media",
        pod=f"{model}-0",
        cpu_quota_cores=quota,
        enforce_cpu_quota=True,
        accel_share=0.3,
        notes=f"Python preprocessing hashes {cpu_mb} MB per item ({instances} instance(s), 3 ms "
        f"accelerator per execution); traffic ramps {start} -> {end}/s over the first third of "
        f"the fault phase, then holds; CPU limit "
        f"{quota} core(s), enforced.",
        params={
            "cpu_mb_per_item": cpu_mb,
            "instances": instances,
            "rate_start": start,
            "rate_end": end,
            "cpu_quota_cores": quota,
        },
    )


def _memcopy(
    name: str,
    model: str,
    *,
    small: int,
    large: int,
    rate: float,
    copy_passes: int,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=4,
        input_dims=(-1,),
        instance_count=1,
        dynamic_batching=DynamicBatching(1000, (4,)),
        behaviour=Behaviour(accel_ms=4, copy_passes=copy_passes, ledger_dir=LEDGER),
    )
    total = base + fault
    loads = (
        Load(_open(model, (1, small), base, Segment(0, rate), seed=61)),
        Load(_open(model, (1, large), fault, Segment(0, rate), seed=62), start_s=base),
    )
    return Scenario(
        name,
        "memory_copy",
        model,
        (spec,),
        loads,
        baseline_s=base,
        fault_s=total - base,
        scrape_interval_s=scrape,
        namespace="vision",
        pod=f"{model}-0",
        accel_share=0.6,
        notes=f"A client release sends {large * 4 / 1e6:.1f} MB FP32 inputs instead of "
        f"{small * 4 / 1e3:.0f} kB at the same {rate}/s; Triton copies each into the Python "
        f"backend (compute_input); the model converts layout/dtype {copy_passes}x in execute.",
        params={
            "input_bytes_before": small * 4,
            "input_bytes_after": large * 4,
            "rate": rate,
            "copy_passes": copy_passes,
        },
    )


def _reload(
    name: str,
    model: str,
    *,
    every_s: float,
    poll: int,
    atomic: bool,
    rate: float,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=8,
        input_dims=(16,),
        dynamic_batching=DynamicBatching(500, (4, 8)),
        behaviour=Behaviour(
            accel_ms=8,
            accel_ms_per_item=0.5,
            init_ms=800,
            cold_execs=3,
            cold_ms=400,
            cold_decay=0.5,
            ledger_dir=LEDGER,
        ),
    )
    return Scenario(
        name,
        "model_reload",
        model,
        (spec,),
        (Load(_open(model, (1, 16), base + fault, Segment(0, rate), seed=71)),),
        onset=rewrites(spec, every_s, atomic=atomic),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        control_mode="poll",
        poll_secs=poll,
        # The stub writes __pycache__ into the version dir, so poll mode reloads once after start.
        preroll_s=3 * poll + 5,
        namespace="recsys",
        pod=f"{model}-0",
        accel_share=0.4,
        notes=f"Poll mode (--repository-poll-secs={poll}); from onset a deploy job rewrites the "
        f"model ({'atomically' if atomic else 'file by file'}) every {every_s} s; each reload "
        "costs 0.8 s "
        f"of load and 3 slow first executions, under a steady {rate}/s.",
        params={"every_s": every_s, "poll_secs": poll, "atomic": atomic, "rate": rate},
    )


def _contention(
    name: str,
    model: str,
    *,
    workers: int,
    nice: int,
    rate: float,
    cpu_mb: float,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=4,
        input_dims=(16,),
        instance_count=2,
        dynamic_batching=DynamicBatching(1000, (4,)),
        behaviour=Behaviour(
            accel_ms=5,
            cpu_bytes=int(cpu_mb * 1e6),
            cpu_bytes_per_item=int(cpu_mb * 0.5e6),
            ledger_dir=LEDGER,
        ),
    )
    return Scenario(
        name,
        "node_contention",
        model,
        (spec,),
        (Load(_open(model, (1, 16), base + fault, Segment(0, rate), seed=81)),),
        onset=hog(workers, nice),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="docs",
        pod=f"{model}-0",
        cpu_quota_cores=4.0,
        accel_share=0.3,
        notes=f"Constant {rate}/s and config; at onset a CPU hog with {workers} threads starts on the "
        "node "
        f"in its own session with autogroup nice {nice} (a neighbour with a larger request).",
        params={"hog_workers": workers, "autogroup_nice": nice, "rate": rate, "cpu_mb": cpu_mb},
    )


def _retry(
    name: str,
    model: str,
    *,
    accel_ms: float,
    instances: int,
    base_rate: float,
    burst_rate: float,
    after_rate: float,
    timeout_s: float,
    ingress_timeout_s: float | None,
    retries: int,
    scrape: float,
    base: float,
    fault: float,
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=0,
        input_dims=(1, 16),
        instance_count=instances,
        behaviour=Behaviour(accel_ms=accel_ms, ledger_dir=LEDGER),
    )
    load = _open(
        model,
        (1, 16),
        base + fault,
        Segment(0, base_rate),
        Segment(base, burst_rate),
        Segment(base + 8, after_rate),
        timeout_s=timeout_s,
        ingress_timeout_s=ingress_timeout_s,
        retries=retries,
        max_outstanding=800,
        seed=91,
    )
    capacity = instances * 1000 / accel_ms
    return Scenario(
        name,
        "retry_storm",
        model,
        (spec,),
        (Load(load),),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="speech",
        pod=f"{model}-0",
        accel_share=0.5,
        notes=f"Capacity {capacity:.0f}/s (unbatched, {instances} x {accel_ms} ms). Clients time "
        "out "
        f"after {timeout_s} s and retry at once up to {retries} times. Demand {base_rate}/s, an "
        f"8 s burst of {burst_rate}/s at onset, then {after_rate}/s (below capacity): retries keep "
        "the server overloaded.",
        params={
            "capacity": capacity,
            "base_rate": base_rate,
            "burst_rate": burst_rate,
            "after_rate": after_rate,
            "timeout_s": timeout_s,
            "ingress_timeout_s": ingress_timeout_s,
            "retries": retries,
        },
    )


def _healthy_steady(
    name: str, model: str, *, rate: float, scrape: float, base: float, fault: float
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=8,
        input_dims=(16,),
        instance_count=2,
        dynamic_batching=DynamicBatching(2000, (4, 8)),
        behaviour=Behaviour(accel_ms=15, accel_ms_per_item=1, ledger_dir=LEDGER),
    )
    return Scenario(
        name,
        None,
        model,
        (spec,),
        (Load(_open(model, (1, 16), base + fault, Segment(0, rate), burstiness=2, seed=101)),),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="ml",
        pod=f"{model}-0",
        accel_share=0.4,
        notes=f"Steady {rate}/s well within capacity; nothing happens at 'onset'.",
        params={"rate": rate},
    )


def _healthy_ramp(
    name: str, model: str, *, start: float, end: float, scrape: float, base: float, fault: float
) -> Scenario:
    spec = ModelSpec(
        model,
        max_batch_size=8,
        input_dims=(16,),
        instance_count=2,
        dynamic_batching=DynamicBatching(1000, (4, 8)),
        behaviour=Behaviour(accel_ms=10, accel_ms_per_item=1, ledger_dir=LEDGER),
    )
    load = _open(
        model, (1, 16), base + fault, Segment(0, start), Segment(base, start, end), seed=111
    )
    return Scenario(
        name,
        None,
        model,
        (spec,),
        (Load(load),),
        baseline_s=base,
        fault_s=fault,
        scrape_interval_s=scrape,
        namespace="ml",
        pod=f"{model}-0",
        accel_share=0.4,
        notes=f"Traffic ramps {start} -> {end}/s from onset, within capacity (2 instances, "
        "batching).",
        params={"rate_start": start, "rate_end": end},
    )


B, F = 60.0, 75.0  # recorded scenarios
HB, HF = 45.0, 60.0  # held-out variants

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        _batching_delay(
            "batching_delay",
            "ranker",
            rate=6,
            delay_us=150_000,
            max_batch=16,
            client_batch=1,
            scrape=5,
            base=B,
            fault=F,
        ),
        _too_few(
            "too_few_instances",
            "detector",
            accel_ms=35,
            base_rate=15,
            fault_rate=32,
            scrape=2,
            base=B,
            fault=F,
        ),
        _too_many(
            "too_many_instances",
            "segmenter",
            before=1,
            after=4,
            rate=45,
            accel_ms=12,
            per_item_ms=4,
            switch_ms=6,
            scrape=5,
            base=B,
            fault=F,
        ),
        _cold(
            "cold_start",
            "classifier",
            "cold_start",
            warmup=0,
            cold_execs=6,
            cold_ms=2000,
            decay=0.5,
            rate=20,
            instances=1,
            scrape=2,
            base=B,
            fault=F,
        ),
        _cpu(
            "cpu_bottleneck",
            "preproc",
            instances=2,
            cpu_mb=40,
            start=8,
            end=80,
            quota=1.0,
            max_batch=4,
            scrape=5,
            base=B,
            fault=F,
        ),
        _memcopy(
            "memory_copy",
            "imagenet",
            small=16_384,
            large=3_000_000,
            rate=12,
            copy_passes=0,
            scrape=5,
            base=B,
            fault=F,
        ),
        _reload(
            "model_reload",
            "recommender",
            every_s=15,
            poll=2,
            atomic=False,
            rate=25,
            scrape=2,
            base=B,
            fault=F,
        ),
        _contention(
            "node_contention",
            "ocr",
            workers=3,
            nice=-10,
            rate=20,
            cpu_mb=10,
            scrape=5,
            base=B,
            fault=F,
        ),
        _retry(
            "retry_storm",
            "asr",
            accel_ms=30,
            instances=2,
            base_rate=40,
            burst_rate=85,
            after_rate=45,
            timeout_s=0.6,
            ingress_timeout_s=None,
            retries=4,
            scrape=2,
            base=B,
            fault=F,
        ),
        _healthy_steady("healthy_steady", "tagger", rate=15, scrape=15, base=B, fault=F),
        _healthy_ramp("healthy_ramp", "ranker-lite", start=5, end=25, scrape=10, base=B, fault=F),
        _cold(
            "healthy_warmup_deploy",
            "sentiment",
            None,
            warmup=6,
            cold_execs=6,
            cold_ms=2000,
            decay=0.5,
            rate=15,
            instances=1,
            scrape=5,
            base=B,
            fault=F,
        ),
        # Held-out variants: different models, rates, costs and scrape intervals.
        _batching_delay(
            "batching_delay_holdout",
            "embedder",
            rate=10,
            delay_us=80_000,
            max_batch=32,
            client_batch=4,
            scrape=10,
            base=HB,
            fault=HF,
        ),
        _too_few_deploy("too_few_instances_holdout", "pose", scrape=15, base=HB, fault=HF),
        _too_many(
            "too_many_instances_holdout",
            "matting",
            before=2,
            after=6,
            rate=30,
            accel_ms=20,
            per_item_ms=3,
            switch_ms=10,
            scrape=10,
            base=HB,
            fault=HF,
        ),
        _cold(
            "cold_start_holdout",
            "reranker",
            "cold_start",
            warmup=0,
            cold_execs=4,
            cold_ms=1200,
            decay=0.7,
            rate=12,
            instances=2,
            scrape=10,
            base=HB,
            fault=HF,
        ),
        _cpu(
            "cpu_bottleneck_holdout",
            "tokenizer",
            instances=1,
            cpu_mb=16,
            start=10,
            end=90,
            quota=0.5,
            max_batch=8,
            scrape=15,
            base=HB,
            fault=HF,
        ),
        _memcopy(
            "memory_copy_holdout",
            "superres",
            small=65_536,
            large=1_500_000,
            rate=15,
            copy_passes=1,
            scrape=10,
            base=HB,
            fault=HF,
        ),
        _reload(
            "model_reload_holdout",
            "feed-ranker",
            every_s=20,
            poll=5,
            atomic=True,
            rate=15,
            scrape=5,
            base=HB,
            fault=HF,
        ),
        _contention(
            "node_contention_holdout",
            "invoice-ocr",
            workers=2,
            nice=-5,
            rate=30,
            cpu_mb=6,
            scrape=10,
            base=HB,
            fault=HF,
        ),
        _retry(
            "retry_storm_holdout",
            "tts",
            accel_ms=25,
            instances=1,
            base_rate=25,
            burst_rate=55,
            after_rate=30,
            timeout_s=1.5,
            ingress_timeout_s=1.0,
            retries=2,
            scrape=5,
            base=HB,
            fault=HF,
        ),
    )
}
