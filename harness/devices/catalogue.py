"""The catalogue of devices and models a process knows: the built-in ones and its preset files', frozen.

A catalogue is never changed: one with more presets is a new catalogue (`with_file`, `beside`). A process has
one in use (`catalogue()`), set where a command reads its presets (`use`): `--presets`, and a run's folder
re-read (its presets.yaml beside its scenario). A name defined twice with different figures is an error, not
the last load winning.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar, cast

import yaml

from harness.devices import builtin
from harness.devices.device import Device
from harness.devices.gpu import Accelerator
from harness.devices.models import ModelSpec
from harness.devices.preset_file import KINDS, build, read_presets
from harness.devices.step import KvDtype, PerformanceModel, Serving
from harness.errors import PresetError
from harness.yamlfile import read_yaml

T = TypeVar("T")
RUN_PRESETS = "presets.yaml"  # in a run's folder: the presets its run used beyond the built-in ones


@dataclass(frozen=True, slots=True)
class Catalogue:
    devices: Mapping[str, Device]
    models: Mapping[str, ModelSpec]
    files: tuple[Path, ...] = ()  # the preset files read into it, in order

    def with_file(self, path: Path) -> Catalogue:
        """This catalogue and a presets file's entries; PresetError for a bad file or a name it redefines."""
        if path.resolve() in self.files:
            return self
        return self._joined(path, *read_presets(path))

    def _joined(self, path: Path, devices: Mapping[str, Device], models: Mapping[str, ModelSpec]) -> Catalogue:
        return Catalogue(_joined(self.devices, devices, path), _joined(self.models, models, path),
                         (*self.files, path.resolve()))

    def refreshed(self, path: Path) -> Catalogue:
        """This catalogue and a presets file's entries as the file now holds them, replacing same-named ones
        (a twin's preset rewritten as its fit is refined)."""
        devices, models = read_presets(path)
        files = self.files if path.resolve() in self.files else (*self.files, path.resolve())
        return Catalogue(MappingProxyType({**self.devices, **devices}), MappingProxyType({**self.models, **models}),
                         files)

    def beside(self, path: Path) -> Catalogue:
        """This catalogue and the presets a run used, kept beside its scenario.yaml or summary.json."""
        kept = path.parent / RUN_PRESETS
        return self.with_file(kept) if kept.is_file() else self

    def with_devices(self, *devices: Device) -> Catalogue:
        """This catalogue with `devices` in it, a same-named one replaced (a fit's own devices as it refines
        them)."""
        return Catalogue(MappingProxyType({**self.devices, **{d.name: d for d in devices}}), self.models, self.files)

    def with_models(self, *models: ModelSpec) -> Catalogue:
        """This catalogue with `models` in it, a same-named one replaced."""
        return Catalogue(self.devices, MappingProxyType({**self.models, **{m.name: m for m in models}}), self.files)

    def files_here(self) -> list[Path]:
        """Its preset files that are still there: a simulator or worker the process starts reads them too."""
        return [path for path in self.files if path.is_file()]


def _joined(known: Mapping[str, T], new: Mapping[str, T], path: Path) -> Mapping[str, T]:
    for name, entry in new.items():
        if name in known and known[name] != entry:
            raise PresetError(f"{path}: {name}: already defined with other figures (built in, or in an earlier "
                              "presets file): give it another name")
    return MappingProxyType({**known, **new})


BUILTIN = Catalogue(MappingProxyType({d.name: d for d in builtin.DEVICES}),
                    MappingProxyType({m.name: m for m in builtin.MODELS}))
_in_use = [BUILTIN]
_scoped: ContextVar[Catalogue | None] = ContextVar("catalogue", default=None)


def catalogue() -> Catalogue:
    """The catalogue in scope (`within`), else the one this process uses."""
    return _scoped.get() or _in_use[-1]


@contextmanager
def within(scoped: Catalogue) -> Iterator[Catalogue]:
    """`scoped` as the catalogue for the code inside, the process's left as it is (a run's summary read with
    the presets it was made with)."""
    token = _scoped.set(scoped)
    try:
        yield scoped
    finally:
        _scoped.reset(token)


def use(chosen: Catalogue) -> Catalogue:
    """Make `chosen` the process's catalogue (where a command reads its presets); returns it."""
    _in_use[-1] = chosen
    return chosen


def load_presets(path: Path) -> list[str]:
    """The process's catalogue and a presets file; returns the file's accelerators' names."""
    devices, models = read_presets(path)
    known = catalogue()
    if path.resolve() not in known.files:
        use(known._joined(path, devices, models))
    return list(devices)


def resolve_accelerator(value: str | dict[str, Any]) -> Device:
    """A device's name in the catalogue, or a custom one's fields (`kind: asic` for an SRAM chip); ValueError
    if neither."""
    if isinstance(value, str):
        return _named(catalogue().devices, value, "accelerator")
    kind = value.get("kind", "gpu")
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    return cast(Device, _custom(KINDS[kind], {k: v for k, v in value.items() if k != "kind"}))


def resolve_model(value: str | dict[str, Any]) -> ModelSpec:
    """A model's name in the catalogue, or a custom model's fields; ValueError if neither."""
    if isinstance(value, str):
        return _named(catalogue().models, value, "model")
    return _custom(ModelSpec, value)


def gpu(name: str, within: Catalogue | None = None) -> Accelerator:
    """A GPU of the catalogue by name (a roofline to fit or check); ValueError for another kind or none."""
    device = _named((within or catalogue()).devices, name, "accelerator")
    if not isinstance(device, Accelerator):
        raise ValueError(f"{name!r} is no GPU: it has no roofline")
    return device


def _named(entries: Mapping[str, T], name: str, what: str) -> T:
    if name not in entries:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(sorted(entries))}")
    return entries[name]


def _custom(cls: type[T], fields: dict[str, Any]) -> T:
    entry = dict(fields)
    name = str(entry.pop("name", "custom"))
    try:
        return cast(T, build(cls, name, entry, "custom"))
    except PresetError as exc:
        raise ValueError(str(exc).removeprefix("custom: ")) from None


def save_used(folder: Path, used: Catalogue | None = None) -> None:
    """The preset files of the catalogue in use, as one file in a run's folder, so that every command reads
    the run back (its scenario and summary name those accelerators and models) on any machine, the files
    gone."""
    merged: dict[str, dict[str, object]] = {"accelerators": {}, "models": {}}
    for path in (used or catalogue()).files_here():
        data = cast(dict[str, dict[str, object]], read_yaml(path) or {})  # checked by the catalogue: a mapping
        for key, entries in merged.items():
            entries.update(data.get(key) or {})
    if any(merged.values()):
        (folder / RUN_PRESETS).write_text(yaml.safe_dump({k: v for k, v in merged.items() if v}, sort_keys=False),
                                          encoding="utf-8")


def build_model(accelerator: str, model: str, weights: str = "auto", tp: int = 1, async_scheduling: bool = True,
                kv_cache_dtype: KvDtype = "auto", graph_max: int = 0, expert_parallel: bool = False,
                within: Catalogue | None = None) -> PerformanceModel:
    """The law of a named device for a named model, served as the rest says."""
    known = within or catalogue()
    serving = Serving(weights, tp, async_scheduling, kv_cache_dtype, graph_max, expert_parallel)
    return _named(known.devices, accelerator, "accelerator").law(_named(known.models, model, "model"), serving)
