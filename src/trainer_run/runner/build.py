"""From a composed config (plain dicts) to a ready :class:`~trainer_run.training.Trainer`, or
on the server rank of a ``dist_async`` run to its :class:`ParameterServer`.

:func:`build_run` builds what every process needs; :func:`trainer_of` and :func:`build_server`
the process's role. Every value is checked here or in the constructor it feeds before any
work starts; a bad one raises :class:`~trainer_run.errors.ConfigError` naming the key. Random
streams are split from ``seed``, so changing the model does not change the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy

from trainer_run import data as datasets
from trainer_run import devices, optimizers, schedulers
from trainer_run.backend import Backend
from trainer_run.callbacks import HOOKS, Callbacks
from trainer_run.console import warn
from trainer_run.data import augmentation, on_device, prefetch
from trainer_run.data.datasets import take
from trainer_run.data.text_windows import WindowIterator, Windows
from trainer_run.errors import ConfigError, check, check_number
from trainer_run.kvstore import mpi_job
from trainer_run.kvstore.request import KVStoreRequest
from trainer_run.loss_scaling import LossScaler
from trainer_run.metrics import selection
from trainer_run.models import build_model, first_batch, parameter_rules
from trainer_run.profiling import Profiler, synchronizer
from trainer_run.runner.arguments import accepted, arguments, call, instantiate, locate, prefixed
from trainer_run.runner.extend import extend
from trainer_run.targets import Kind, instances_callable
from trainer_run.training import StopTrigger, Trainer, time_limit
from trainer_run.training.parameter_server import ParameterServer
from trainer_run.updaters import ParallelUpdater, StandardUpdater, parts_of
from trainer_run.updaters.clipping import global_norm_clip
from trainer_run.updaters.weighting import batches_per_update

DATA_KEYS = ("batch_size", "val_fraction", "task", "normalize", "overfit_batches", "on_device",
             "transforms", "workers")
"""Keys of the dataset section the runner reads itself."""
KINDS = {
    "backend": Kind("an array backend (trainer_run.backend.Backend)", base=Backend),
    "kvstore": Kind("a kvstore request (trainer_run.kvstore.request.KVStoreRequest)",
                    base=KVStoreRequest),
    "loss_scale": Kind("a loss scaler (subclass trainer_run.loss_scaling.LossScaler)", base=LossScaler),
    "updater": Kind("an updater (subclass trainer_run.updaters.StandardUpdater)", base=StandardUpdater),
    "optimizer": Kind("a trainer_run.optimizers.Optimizer (subclass it)", base=optimizers.Optimizer),
    "scheduler": Kind("a trainer_run.schedulers.LRScheduler (subclass it)",
                      base=schedulers.LRScheduler),
    "hook": Kind("a callable called with the iteration", fits=instances_callable),
}
"""What each group's ``_target_`` must build, checked before it is called."""


@dataclass
class Run:
    """What every process of a run builds from the config before it trains or serves."""

    backend: object
    data: datasets.Data
    batch_size: int
    model: object
    kvstore: object        # None: nothing to exchange
    asynchronous: bool     # the rules' decision: the kvstore's server applies the optimizer
    iterator: datasets.SerialIterator
    stop: StopTrigger
    total: int             # iterations the run will make
    samples: int           # examples per update, all workers
    optimizer: object
    max_time: float | None = None  # seconds of training a session may take (None: no limit)
    augmentation: object = None    # dataset.transforms' (None: none)
    threads: int = 0               # dataset.workers: threads gathering batches ahead (0: none)

    @property
    def limit_note(self) -> str | None:
        """With both limits given, which one ends the run (None with one)."""
        return self.stop.deciding(len(self.data.train) / self.samples)

    @property
    def serves(self) -> bool:
        """Whether this process is the server of a ``dist_async`` run (its last rank)."""
        return getattr(self.kvstore, "is_server", False)


DEFAULT_ITERATIONS = 1000
"""The iterations of a run given neither ``trainer.max_iterations`` nor ``trainer.max_epochs``."""


def build_run(config: dict, folder: Path | None = None) -> Run:
    """The parts every process builds: random streams split from ``seed`` (one for the data,
    one for the model's initial parameters, one for shuffling), backend, data, model (its
    parameters frozen and multiplied as ``model.freeze``, ``lr_mult`` and ``wd_mult`` say:
    :mod:`trainer_run.models.parameter_rules`; tried on the first batch:
    :mod:`trainer_run.models.first_batch`), kvstore, iterator, stop trigger, time limit,
    optimizer and the training batches' transforms (a fourth stream). ``folder``: the run's
    folder, where a loader may keep what it derives from the data (:class:`.datasets.Use`)."""
    seed = check_number("seed", config["seed"], low=0, integer=True)
    selection.check_objective((config.get("objective") or {}).get("metric"), config.get("metrics"))
    data_seed, model_seed, shuffle_seed, augment_seed = numpy.random.SeedSequence(seed).spawn(4)
    threads = prefetch.checked_workers(config["dataset"].get("workers", 0))
    backend = build_backend(config["backend"], model_seed)
    note = prefetch.workers_note(threads)
    if note is not None:  # printed with the backend's notes on the cores' use
        backend.notes = [*getattr(backend, "notes", ()), note]
    data, batch_size = build_data(config["dataset"], numpy.random.default_rng(data_seed),
                                  dtype=backend.dtype, folder=folder)
    model = build_model(config["model"], data, backend)
    parameter_rules.apply(model, config["model"])
    first_batch.check(model, data, backend, batch_size, config["model"]["_target_"])
    u, t = config["updater"], config["trainer"]
    kvstore, decision = build_kvstore(config["kvstore"], u, str(backend.dtype))
    # the updater applies it; every rank checks it, a server (which builds none) too
    prefixed("updater", global_norm_clip, u.get("clip_global_norm"), decision.asynchronous)
    workers = kvstore.num_workers if kvstore is not None else 1
    # every worker draws the same global batch of workers * batch_size and takes its shard
    overfit = config["dataset"].get("overfit_batches")
    if overfit is not None:
        data = overfit_data(data, overfit, batch_size * workers)
    devices = u.get("devices", 1)  # updater=parallel's replicas
    data = on_device.placed(data, backend, config["dataset"].get("on_device"),
                            u.get("prefetch", 0), threads,
                            devices if isinstance(devices, int) else len(devices))
    shuffle_rng = numpy.random.default_rng(shuffle_seed)
    if isinstance(data.train, Windows):  # a text's: windows at random offsets
        iterator = WindowIterator(data.train, batch_size * workers, rng=shuffle_rng)
    else:
        iterator = datasets.SerialIterator(data.train, batch_size * workers,
                                           shuffle=overfit is None, rng=shuffle_rng)
    accum_grad = prefixed("updater", batches_per_update, u["accum_grad"])
    samples = batch_size * workers * accum_grad
    limit = t["max_iterations"]
    if limit is None and t["max_epochs"] is None:
        limit = DEFAULT_ITERATIONS
    stop = prefixed("trainer", StopTrigger, limit, t["max_epochs"])
    max_time = prefixed("trainer", time_limit.seconds, t.get("max_time"))
    total = stop.total_iterations(len(data.train) / samples)
    optimizer = build_optimizer(config["optimizer"], config.get("scheduler"), total)
    transforms = augmentation.build(config["dataset"].get("transforms"), augment_seed,
                                    {"classes": data.out_size, "task": data.task})
    if transforms is not None:
        transforms.try_on(take(data.train, numpy.arange(min(2, len(data.train)))))
    _warn_single_process(getattr(kvstore, "type", None) or "")
    return Run(backend, data, batch_size, model, kvstore, decision.asynchronous, iterator, stop,
               total, samples, optimizer, max_time, transforms, threads)


def _warn_single_process(store: str) -> None:
    """A ``kvstore=dist_*`` run that no launcher started has one process: says how to start more."""
    if store.startswith("dist") and not mpi_job.launched():
        warn(f"kvstore={store}: this run has a single process because it was not started by "
             f"mpiexec; to train on N processes, start it with mpiexec -n N trainer-run "
             f"kvstore={store} ...")


def build_server(run: Run) -> ParameterServer:
    """The server of a ``dist_async`` run (:attr:`Run.serves`): it owns the weights and the
    optimizer, and serves the workers' pushes instead of training."""
    return ParameterServer(run.kvstore, run.model, run.optimizer, run.backend)


def build_trainer(config: dict, out: Path, extra: dict | None = None) -> Trainer:
    """The training loop of ``config`` writing into ``out`` (a worker's, on a multi-process
    run; see :func:`build_run` and :func:`trainer_of`)."""
    return trainer_of(build_run(config, out), config, out, extra)


def trainer_of(run: Run, config: dict, out: Path, extra: dict | None = None,
               mode=None) -> Trainer:
    """The trainer of the built ``run``: updater, loop and extensions (on rank 0 those that
    write; :func:`.extend.extend`). ``extra`` (the unresolved config, the group choices and the
    overrides) is stored in every checkpoint so that ``resume`` can rebuild the same run.
    ``mode``: None for the run itself, or another use of the same updater with its own stop
    trigger and extensions, whose ``trainer(run, updater, out)`` gives the trainer (the
    learning-rate range test, :class:`.lr_find_job.RangeTestMode`)."""
    if mode is not None:
        return mode.trainer(run, build_updater(run, config), out)
    profiler = Profiler(synchronize=synchronizer(run.backend)) if config["trainer"]["profile"] else None
    updater = build_updater(run, config, profiler)
    trainer = Trainer(updater, run.stop, out=str(out), profiler=profiler, max_time=run.max_time)
    extend(trainer, run, config, extra)
    return trainer


def build_backend(section: dict, seed) -> object:
    """The backend of ``backend._target_`` (``trainer_run.backend.get_backend``: the array
    module ``name``, ``device`` and the compute ``dtype``, which the precision group sets),
    its generator seeded by ``seed``. On a GPU, a ``device`` this process does not see is
    refused in one line."""
    backend = instantiate("backend", section, {"seed": seed}, kind=KINDS["backend"])
    if backend.on_gpu:
        devices.check_visible([backend.device], f"backend.device={backend.device}",
                              "set backend.device to a visible id, or backend=numpy to train "
                              "on the CPU")
    return backend


def build_kvstore(section: dict, updater: dict, dtype: str = "float32"):
    """The kvstore of ``kvstore._target_`` and the rules' decision it comes from. The target
    (:class:`trainer_run.kvstore.request.KVStoreRequest`) takes the section's ``type``,
    ``update_on_kvstore``, ``compression`` and ``timeout``; MXNet's rules
    (:func:`trainer_run.kvstore.trainer_rules.decide`, whose ``asynchronous`` the updater
    follows) then give no store (None) for one replica in one process, ``local`` or ``device``
    for the parallel updater's replicas, a dist store across processes. The parallel updater
    refuses ``kvstore=none``. With ``kvstore.compression.type`` set, the store compresses its
    pushes (on every worker; the ``dist_async`` server learns the threshold from them); a run
    with no store to sum anything, or with gradients that are not float32 (``dtype``), refuses
    it."""
    request = instantiate("kvstore", section, kind=KINDS["kvstore"])
    check(not _is_parallel(updater) or request.type is not None, "updater=parallel sums "
          "gradients through a kvstore; kvstore=none cannot, choose kvstore=local or kvstore=device")
    decision = request.decide(num_devices=max(_replicas(updater), 1))  # its errors name the keys
    compression = request.compression
    if decision.kvstore is None:
        if compression is not None:
            raise ConfigError(f"kvstore.compression.type={compression['type']} compresses the "
                              f"gradients a kvstore sums, and this run has none: one replica in one "
                              f"process uses no kvstore (MXNet's rule); choose updater=parallel with "
                              f"updater.devices >= 2 and kvstore=device, a dist kvstore under "
                              f"mpiexec, or kvstore.compression.type=null")
        return None, decision
    if compression is not None:
        check(dtype == "float32", f"kvstore.compression works on float32 gradients only (MXNet's "
              f"2-bit kernels read float32); this run computes in {dtype}: choose precision=fp32 "
              f"or kvstore.compression.type=null")
    return request.create(decision), decision


def _is_parallel(updater: dict) -> bool:
    """Whether ``updater._target_`` is a :class:`ParallelUpdater`: replicas in one process."""
    klass = locate(updater.get("_target_"), "updater._target_", KINDS["updater"])
    return isinstance(klass, type) and issubclass(klass, ParallelUpdater)


def _replicas(updater: dict) -> int:
    """Model replicas per process: ``updater.devices`` for a :class:`ParallelUpdater`, else 1
    (0 for a ``devices`` value that is neither a count nor a list; the updater refuses it by
    name)."""
    if not _is_parallel(updater):
        return 1
    devices = updater.get("devices")
    return devices if isinstance(devices, int) else len(devices) if isinstance(devices, list) else 0


PART_KEYS = ("accum_grad", "prefetch", "nan_policy", "max_skipped_in_a_row", "clip_global_norm")
"""Keys of the updater section that build the updater's parts (:func:`build_updater`)."""


def build_updater(run: Run, config: dict, profiler=None):
    """The updater of ``updater._target_`` (``StandardUpdater``, ``ParallelUpdater``, or a
    user's subclass) for the built ``run``. Its parts are built here
    (:func:`trainer_run.updaters.parts_of`): ``batches`` from the run's backend,
    ``updater.accum_grad`` and ``prefetch``, and ``dataset.transforms`` and ``workers``;
    ``verdict`` from ``updater.nan_policy``, ``max_skipped_in_a_row``, ``clip_global_norm`` and
    the loss scaler of ``loss_scale``; ``sync`` from the run's kvstore (and the rules'
    ``asynchronous``). The updater gets them with the run's iterator, optimizer and model,
    ``callbacks`` (``updater.callbacks``' hooks), ``profiler`` (``trainer.profile``'s; None:
    off) and the section's other keys (``devices``, ``grad_reduce``, a user's own)."""
    section, loss_scale = config["updater"], config["loss_scale"]
    scaler = build_loss_scaler(loss_scale)
    step = type(run.optimizer).update
    check(scaler is None or "rescale_grad" in accepted(step),
          f"loss_scale._target_={loss_scale.get('_target_')} gives the optimizer's step its "
          f"gradient factor; {type(run.optimizer).__name__}.update must take it: update(index, "
          "weight, grad, state, rescale_grad=None) (see trainer_run.optimizers.Optimizer.update)")
    if _is_parallel(section):
        replicas = _replicas(section)
        check(replicas <= run.batch_size, f"updater.devices={section.get('devices')} needs a "
              f"batch of at least {replicas} examples; dataset.batch_size is {run.batch_size}")
    values = {k: section[k] for k in PART_KEYS if k in section}
    parts = prefixed("updater", parts_of, run.backend, transforms=run.augmentation,
                     workers=run.threads, kvstore=run.kvstore, asynchronous=run.asynchronous,
                     loss_scaler=scaler, **values)
    section = {**section, "callbacks": build_callbacks(section.get("callbacks") or {})}
    factory, kwargs, _ = arguments("updater", section, runner=PART_KEYS, kind=KINDS["updater"])
    return call("updater", factory, kwargs, kind=KINDS["updater"], iterator=run.iterator,
                optimizer=run.optimizer, model=run.model, profiler=profiler, **parts)


def build_loss_scaler(section: dict):
    """The loss scaler of ``loss_scale._target_`` with the section's arguments
    (``LossScaler``: ``scale``; ``DynamicLossScaler``: also ``scaling_factor``, ``interval``,
    ``on_overflow``, ``max_retries``), or None for a null ``_target_``: ``loss_scale=none``
    builds no scaler, and its section holds nothing else."""
    if section.get("_target_") is not None:
        return instantiate("loss_scale", section, kind=KINDS["loss_scale"])
    extra = sorted(k for k in section if k != "_target_")
    check(not extra, f"loss_scale.{extra[0] if extra else ''} is set, and loss_scale._target_ is "
          "null (no loss scaling); choose loss_scale=static or loss_scale=dynamic to scale")
    return None


def build_callbacks(section: dict) -> Callbacks:
    """Each hook's callables (nnabla's per-stage hooks): a dotted name is the callable itself,
    a ``_target_`` mapping builds one."""
    hooks = {}
    for hook, value in section.items():
        key = f"updater.callbacks.{hook}"
        check(hook in HOOKS, f"{key} is not a callback hook; choose one of {', '.join(HOOKS)}")
        items = value if isinstance(value, list) else [] if value is None else [value]
        hooks[hook] = [_callback(item, key) for item in items]
    return Callbacks(hooks)


def _callback(item, key: str):
    if isinstance(item, dict):
        if "_target_" not in item:
            raise ConfigError(f"{key} must be a dotted name or a dict with _target_, got {item!r}")
        return instantiate(key, item, kind=KINDS["hook"])
    return locate(item, key, KINDS["hook"])


def build_data(section: dict, rng, evaluated: str | None = None, dtype="float32",
               folder: Path | None = None) -> tuple[datasets.Data, int]:
    """The data of ``dataset._target_`` by the rules of :func:`trainer_run.data.prepare`
    (``dataset.task``, ``val_fraction`` drawn from ``rng``, ``normalize``, float inputs read in
    ``dtype``) and the batch size. For a run, a batch must fit in the training split.
    ``evaluated`` names the split ``trainer-eval`` measures instead: then any number of
    examples >= 1 will do, and for ``all`` nothing is held out for validation (every example
    is measured anyway). A loader that takes ``use`` is told ``folder`` (the run's) and whether
    it may write there (:class:`.datasets.Use`: a run may, an evaluation may not); one that
    takes ``val_fraction`` holds out its validation split itself."""
    batch_size = check_number("dataset.batch_size", section["batch_size"], low=1, integer=True)
    use = datasets.Use(folder, writable=evaluated is None and folder is not None,
                       evaluated=evaluated)
    factory, kwargs, fixed = arguments("dataset", section, {
        "rng": rng, "use": use, "val_fraction": section["val_fraction"]}, runner=DATA_KEYS)
    result = call("dataset", factory, kwargs, **fixed)
    classes = datasets.declared_classes(factory, kwargs)
    data = datasets.prepare(result, rng, section["val_fraction"], section["task"],
                            section["normalize"], classes, origin=section["_target_"],
                            hold_out=evaluated != "all", dtype=dtype)
    check(evaluated is not None or batch_size <= len(data.train),
          f"dataset.batch_size={batch_size} exceeds the {len(data.train)} training examples")
    return data, batch_size


def overfit_data(data: datasets.Data, batches: int, batch: int) -> datasets.Data:
    """``dataset.overfit_batches``: the first ``batches`` global batches of ``batch`` examples
    of the training split, drawn in the same order every epoch and evaluated as the
    validation split."""
    batches = check_number("dataset.overfit_batches", batches, low=1, integer=True)
    check(batches * batch <= len(data.train),
          f"dataset.overfit_batches={batches} takes {batches} batches of {batch} examples; the "
          f"training split has {len(data.train)}: lower it or dataset.batch_size")
    return data.overfit(batches * batch)


def build_optimizer(section: dict, scheduler_section: dict | None, total_iterations: int):
    """The optimizer of ``optimizer._target_`` with the schedule of ``scheduler`` (None: none)."""
    # the schedule's base_lr interpolates it: its error must name the key the user set
    prefixed("optimizer", optimizers.learning_rate_of, section.get("learning_rate", 0.0))
    scheduler = None
    section = dict(section)
    if scheduler_section is not None:
        scheduler = build_scheduler(scheduler_section, total_iterations)
        section["learning_rate"] = None     # the schedule owns the rate; the optimizer asks it
    return instantiate("optimizer", section, {"lr_scheduler": scheduler}, kind=KINDS["optimizer"])


def build_scheduler(section: dict, total_iterations: int):
    """The schedule of ``scheduler._target_``; ``max_update: null`` runs over the whole run."""
    section = dict(section)
    if "max_update" in section and section["max_update"] is None:
        section["max_update"] = total_iterations
    return instantiate("scheduler", section, kind=KINDS["scheduler"])
