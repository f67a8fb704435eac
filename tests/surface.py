"""What the public surface of a package must be: the checks each package's surface test runs.

A package's public API is its ``__all__`` (httpx's model: users import from the package top,
the submodules may move). The checks: the names are exactly the ones meant (each test lists
them), each resolves, none is private, nothing public-looking is left out of ``__all__``, every
exported class and function is the package's own and says what it is in a docstring, and every
submodule's ``__all__`` resolves too.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType


def surface_problems(package: ModuleType) -> list[str]:
    """Everything wrong with ``package``'s public surface, one line each (empty: all is well)."""
    name = package.__name__
    exported = list(package.__all__)
    problems = [f"{name}.__all__ names {n!r} twice" for n in set(exported) if exported.count(n) > 1]
    for attr in exported:
        if attr.startswith("_"):
            problems.append(f"{name}.__all__ exports the private name {attr!r}")
        if not hasattr(package, attr):
            problems.append(f"{name}.__all__ names {attr!r}, which {name} does not have")
            continue
        problems += _docstring_problems(name, attr, getattr(package, attr))
    for attr, value in vars(package).items():
        if attr.startswith("_") or attr in exported or isinstance(value, ModuleType):
            continue
        problems.append(f"{name}.{attr} is public but not in __all__")
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
        module = importlib.import_module(info.name)
        problems += [
            f"{info.name}.__all__ names {attr!r}, which it does not have"
            for attr in getattr(module, "__all__", ())
            if not hasattr(module, attr)
        ]
    return problems


def _docstring_problems(package: str, attr: str, value: object) -> list[str]:
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return []  # constants and type aliases are documented where they are declared
    problems = []
    if not value.__module__.startswith(f"{package}."):
        problems.append(f"{package}.{attr} is {value.__module__}'s, not the package's own")
    doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    # A dataclass without a docstring gets its signature as one: that says nothing.
    if not doc or not doc.strip() or doc.startswith(f"{value.__name__}("):
        problems.append(f"{package}.{attr} has no docstring")
    return problems
