"""The exceptions a consumer's ``poll()`` (or its commits) raise to the application.

Every one is a :class:`ConsumerException`, so an application's poll loop catches them in one
place; :meth:`ConsumerException.describe` writes one as the history's ``error`` fields do. To
add one, subclass :class:`ConsumerException` (or a group exception, in
``consumer_coordinator``) under Kafka's name for it.
"""

from __future__ import annotations


class ConsumerException(Exception):
    """An exception ``poll()`` raises to the application."""

    def describe(self) -> str:
        """``Name: message``, as the history's ``error`` fields write exceptions."""
        return f"{type(self).__name__}: {self}"
