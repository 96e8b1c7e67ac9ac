"""The plug-in registry: planners, adapters and verifiers found by name (DESIGN.md section 5.10).

A plug-in is found in one of two ways:

* by **name**, through a Python entry point of its group (``ratchet.planners``,
  ``ratchet.adapters``, ``ratchet.verifiers``), declared by the package that provides it (as
  pytest finds ``pytest11`` plug-ins); Ratchet's own plug-ins are registered the same way in its
  ``pyproject.toml``;
* by **dotted path**, ``kind = "python"`` and ``entry = "my_agent.plan:MyPlanner"`` in the task
  spec, for code that is not packaged with entry points.

The object found must carry ``Options``, a pydantic model of the plug-in's own options, and be
callable as ``obj(options=<Options instance>, context=<group's context>)``, returning the planner,
adapter or verifier. A class does both naturally; :func:`plugin` marks a factory function.

The registry reports which distribution (name and version) provided each plug-in
(:class:`PluginIdentity`); the engine pins that identity with the run so that a resume under
another version is refused visibly. Framework-free: imports nothing from Django and nothing of
the planners, adapters or verifiers it loads.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from runtime.errors import PluginConstructionError, PluginLoadError, PluginNotFoundError

PLANNERS = "ratchet.planners"
ADAPTERS = "ratchet.adapters"
VERIFIERS = "ratchet.verifiers"
GROUPS = (PLANNERS, ADAPTERS, VERIFIERS)
"""The entry-point groups a distribution can register plug-ins in."""

PYTHON_KIND = "python"
"""The kind that names a plug-in by dotted path (``entry = "module:Attr"``) instead of by name."""

ENTRY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
"""A dotted path: ``package.module:Attr`` (``Attr`` may itself be dotted, ``Class.factory``)."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class PluginIdentity:
    """Which code a plug-in name resolved to.

    Attributes:
        group: the entry-point group, e.g. ``"ratchet.planners"``.
        name: the name used in the task spec (``"python"`` for a dotted path).
        entry: the object reference, ``"module:Attr"``.
        distribution: the installed distribution that provides the module, or None when the
            module does not belong to one (a script directory on ``sys.path``).
        version: that distribution's version, or None.
    """

    group: str
    name: str
    entry: str
    distribution: str | None
    version: str | None

    def as_json(self) -> dict[str, str | None]:
        """The identity as the run pins it: ``{"name", "entry", "distribution", "version"}``."""
        return {"name": self.name, "entry": self.entry, "distribution": self.distribution,
                "version": self.version}


@dataclass(frozen=True)
class LoadedPlugin:
    """A plug-in found and imported, not yet constructed.

    Attributes:
        identity: where it came from.
        factory: the object named by the entry: ``factory(options=..., context=...)`` builds it.
        options_model: its pydantic options model (``factory.Options``).
    """

    identity: PluginIdentity
    factory: Any
    options_model: type[BaseModel]

    def options(self, data: Mapping[str, Any]) -> BaseModel:
        """Validate ``data`` with the plug-in's options model, refusing unknown fields.

        A model that does not itself forbid extra fields (pydantic ignores them by default) is
        validated through :func:`options_forbidding`, so a misspelt option is an error naming
        its TOML path for every plug-in, not only for those built on ``StrictOptions``. A model
        that declares ``extra="allow"`` asked for free-form fields and keeps them.

        Raises:
            pydantic.ValidationError: the caller renders it with each field's TOML path.
        """
        return options_forbidding(self.options_model).model_validate(dict(data))

    def build(self, *, options: BaseModel, context: Any) -> Any:
        """Construct the plug-in.

        Raises:
            PluginConstructionError: the plug-in raised (the original exception is chained).
        """
        try:
            return self.factory(options=options, context=context)
        except Exception as exc:
            raise PluginConstructionError(
                f"{self.identity.group} plug-in {self.identity.name!r} raised while being "
                f"constructed: {type(exc).__name__}: {str(exc)[:300]}",
                group=self.identity.group, plugin=self.identity.name, entry=self.identity.entry,
            ) from exc


@functools.cache
def options_forbidding(model: type[BaseModel]) -> type[BaseModel]:
    """``model``, or a subclass of it that refuses unknown fields (DESIGN.md section 5.10).

    Args:
        model: a plug-in's pydantic options model.

    Returns:
        ``model`` itself when it already forbids extra fields or declares ``extra="allow"``;
        otherwise a subclass with ``extra="forbid"`` and the same name, fields and validators,
        so the plug-in receives an instance of its own model (``isinstance`` holds).
    """
    if model.model_config.get("extra") in ("forbid", "allow"):
        return model
    config = {**model.model_config, "extra": "forbid"}
    return type(model.__name__, (model,), {"model_config": config, "__module__": model.__module__,
                                           "__qualname__": model.__qualname__})


def plugin(options: type[BaseModel]) -> Callable[[F], F]:
    """Mark a factory function as a plug-in whose options are validated by ``options``.

    Usage::

        @plugin(options=MyOptions)
        def my_adapter(*, options: MyOptions, context: AdapterContext) -> MyAdapter: ...
    """

    def mark(factory: F) -> F:
        factory.Options = options  # type: ignore[attr-defined]
        return factory

    return mark


@dataclass(frozen=True)
class _Registered:
    """An entry point and the name of the distribution that declares it (None: none does)."""

    value: str
    distribution: str | None


@functools.cache
def _entry_points(group: str) -> dict[str, _Registered]:
    # The distribution's name is read here, once per process: ``Distribution.name`` parses the
    # package's METADATA file on every access, and a run session loads a dozen plug-ins.
    found: dict[str, _Registered] = {}
    for ep in importlib.metadata.entry_points(group=group):
        if ep.name not in found:  # the first installed distribution wins, as pip resolves it
            found[ep.name] = _Registered(value=ep.value,
                                         distribution=ep.dist.name if ep.dist is not None else None)
    return found


@functools.cache
def _module_distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def plugin_names(group: str) -> list[str]:
    """The names registered in ``group`` by installed distributions, sorted."""
    return sorted(_entry_points(group))


def plugin_cache_clear() -> None:
    """Forget the entry points read so far (after installing a package in this process)."""
    _entry_points.cache_clear()
    _module_distributions.cache_clear()
    _version_of.cache_clear()


@functools.lru_cache(maxsize=256)
def _version_of(distribution: str) -> str | None:
    # Cached per process: the version pinned for a run must describe the code this process has
    # imported, which an upgrade on disk does not change either (and the lookup re-reads
    # package metadata, a cost paid on every run session otherwise).
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _distribution_of(module: str) -> tuple[str | None, str | None]:
    names = _module_distributions().get(module.split(".")[0]) or []
    if not names:
        return None, None
    return names[0], _version_of(names[0])


def _import(group: str, name: str, entry: str) -> Any:
    module_name, _, attr = entry.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # an import runs arbitrary code: any failure is a load failure
        raise PluginLoadError(
            f"{group} plug-in {name!r} cannot be imported from {entry!r}: "
            f"{type(exc).__name__}: {str(exc)[:300]}", group=group, plugin=name, entry=entry,
        ) from exc
    return obj


def plugin_load(*, group: str, name: str, entry: str | None = None) -> LoadedPlugin:
    """Find and import the plug-in ``name`` of ``group`` (``name == "python"``: at ``entry``).

    Args:
        group: one of :data:`GROUPS`.
        name: the spec's kind (``"scripted"``, ``"note-taker"``) or :data:`PYTHON_KIND`.
        entry: ``"module:Attr"``; required with ``"python"``, ignored otherwise.

    Returns:
        The :class:`LoadedPlugin` with its identity.

    Raises:
        PluginNotFoundError: no installed distribution registers ``name`` in ``group``.
        PluginLoadError: the code cannot be imported, the entry is malformed, or the object has
            no pydantic ``Options`` model or is not callable.
    """
    if name == PYTHON_KIND:
        if not isinstance(entry, str) or not ENTRY_RE.match(entry):
            raise PluginLoadError(f"{group} plug-in 'python' needs entry = \"module:Attr\", got {entry!r:.80}",
                                  group=group, plugin=name)
        ref = entry
        distribution, version = _distribution_of(ref.partition(":")[0])
    else:
        ep = _entry_points(group).get(name)
        if ep is None:
            known = ", ".join(plugin_names(group)) or "none"
            raise PluginNotFoundError(f"no {group} plug-in named {name!r:.80}; installed: {known}",
                                      group=group, plugin=name[:80])
        ref, distribution = ep.value, ep.distribution
        version = _version_of(distribution) if distribution is not None else None
    obj = _import(group, name, ref)
    options_model = getattr(obj, "Options", None)
    if not (isinstance(options_model, type) and issubclass(options_model, BaseModel)) or not callable(obj):
        raise PluginLoadError(
            f"{ref!r} is not a {group} plug-in: it needs an Options attribute that is a pydantic "
            "model and must be callable as obj(options=..., context=...)", group=group, plugin=name, entry=ref,
        )
    identity = PluginIdentity(group=group, name=name, entry=ref, distribution=distribution, version=version)
    return LoadedPlugin(identity=identity, factory=obj, options_model=options_model)

