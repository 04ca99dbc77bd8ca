"""Small name -> object registries (normalizers, schemes, activations, ...).

An unknown name is an error that lists the valid ones and the closest match.
"""
from __future__ import annotations

import difflib
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


def closest(name: str, valid: list[str], n: int = 3) -> list[str]:
    """The valid names closest to `name` (for "did you mean" hints)."""
    return difflib.get_close_matches(name, valid, n=n, cutoff=0.5)


def unknown_name_message(kind: str, name: object, valid: list[str]) -> str:
    hint = closest(str(name), valid)
    did_you_mean = f" Did you mean {', '.join(repr(h) for h in hint)}?" if hint else ""
    return f"unknown {kind} {name!r}.{did_you_mean} Valid: {', '.join(valid)}."


class UnknownNameError(ValueError):
    """A name that no registry entry has; the message lists the valid names."""


class Registry(Generic[T]):
    """A named collection; `registry.register("name")(obj)` adds an entry."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str):
        def add(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = obj
            return obj

        return add

    def unregister(self, name: str) -> T:
        """Take an entry out again (a test's toy scheme), returning it; an unknown name is an error."""
        self.get(name)
        return self._entries.pop(name)

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise UnknownNameError(unknown_name_message(self.kind, name, self.names()))
        return self._entries[name]

    def names(self) -> list[str]:
        return list(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._entries.items())

    def __iter__(self) -> Iterator[str]:
        """The names, in registration order (so `tuple(SCHEMES)` lists the schemes)."""
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def check_options(kind: str, name: str, given: dict, valid: dict) -> None:
    """Refuse option keys that the `kind` named `name` does not declare."""
    unknown = sorted(set(given) - set(valid))
    if unknown:
        names = ", ".join(valid) if valid else "(it takes none)"
        raise ValueError(f"{kind} {name!r} has no option {', '.join(map(repr, unknown))}; valid: {names}")
