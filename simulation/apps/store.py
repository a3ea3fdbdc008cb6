"""An external store that a sink application writes to: a database outside Kafka.

It survives the sink's crashes and keeps a changelog of every accepted write, written to the
history as a ``log`` line of topic ``store.<sink>`` so that the checker sees each row at a
position. Three write modes, as the seeds describe:

* ``append``: every write adds a row (at-least-once input makes duplicates);
* ``dedup``: a write whose unique key (the input record's value) is already stored is
  ignored;
* ``version``: a write carries a version (the input offset) for a key (the input partition)
  and is accepted only if the version is newer than the stored one, a precondition update.
"""

from __future__ import annotations

from typing import Literal

StoreMode = Literal["append", "dedup", "version"]


class ExternalStore:
    def __init__(self, name: str, mode: StoreMode) -> None:
        self.name = name
        self.mode = mode
        self.rows: list[str] = []
        self._keys: set[str] = set()
        self._versions: dict[str, int] = {}

    @property
    def topic(self) -> str:
        return f"store.{self.name}"

    def write(self, unique_key: str, version_key: str, version: int, row: str) -> bool:
        """Apply one write; False if the mode's rule rejected it."""
        if self.mode == "dedup":
            if unique_key in self._keys:
                return False
            self._keys.add(unique_key)
        elif self.mode == "version":
            if self._versions.get(version_key, -1) >= version:
                return False
            self._versions[version_key] = version
        self.rows.append(row)
        return True

    def records(self) -> list[dict[str, object]]:
        return [{"offset": i, "value": row} for i, row in enumerate(self.rows)]
