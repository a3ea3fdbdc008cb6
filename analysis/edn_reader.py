"""A fast reader for the EDN that Jepsen's Kafka workload writes, giving exactly what
`edn_format.loads_all` gives, or giving up.

`edn_format` lexes and parses with PLY: 110-180 µs an op (one line, one op map) of a Jepsen
history. This reader cuts the text into tokens (str.split on ASCII text without strings,
comments or `#`; else one compiled regular expression, `_TOKEN`), a chunk of whole lines at a
time, and builds the values in one loop over the tokens with an explicit stack (no recursion):
12-18 µs an op, a third of it hashing edn_format's Keywords as map keys, 7-9 µs when the
top-level maps are read by keyword name (`keyword_names`, as the Jepsen converter reads them;
benchmarks/bench_edn.py). It pauses the garbage collector while it builds.

The subset read (everything else gives up):

* maps `{}`, vectors `[]`, lists `()` and sets `#{}`; commas are whitespace, `;` starts a
  comment to the end of the line; whitespace is only space, tab, newline and comma, as for
  edn_format (a carriage return, say, gives up);
* keywords `:name` and `:ns/name`, symbols (`a`, `a.b/c`, `-`, `/`) and `nil`, `true`,
  `false`, their names made of ASCII letters, digits and ``. * + ! - _ ? $ % & = < >``;
* integers, with a sign and a bigint `N` suffix (no leading zero), and floats
  (`1.5`, `-2.0e-3`, `1e3`);
* strings, with the escapes `\\" \\\\ \\' \\a \\b \\f \\n \\r \\t \\v` and `\\uXXXX`.

The values are edn_format's own: `Keyword`, `Symbol`, `ImmutableDict` for a map,
`ImmutableList` for a vector, `tuple` for a list, `frozenset` for a set, and `str`, `int`,
`float`, `bool`, `None`; equal keywords and symbols are one shared object. (With
`plain_top_maps`, a top-level map is a plain dict: see `read_forms`.)

The fallback rule: whatever is outside the subset (tagged literals such as `#inst`, `#uuid`
or `#jepsen...`, characters `\\a`, ratios `1/2`, decimals `1.5M`, hex `0x1F`, `#_` discards,
`^` metadata, `##Inf`, non-ASCII names, an unknown string escape, a map with an odd number of
forms, nesting deeper than `MAX_DEPTH`) and anything malformed (an unclosed form, a stray
closer) raises `GiveUp`; the caller then reads the text with edn_format as before, which
gives the answer, or the error, it always gave. A word (a run of characters up to whitespace,
a bracket, a quote or `;`) is accepted only when edn_format's lexer reads that same run as one
token of the same kind, so that the two readers cut the text alike: `12abc` (edn_format reads
`12` and `abc`), `007` (`0`, `0`, `7`), `:a/b/c`, `/a`, `a/`, `.5` give up.

To extend it: a new word kind is a pattern that matches only words edn_format's lexer
(edn_format/edn_lex.py, its rules tried in order) reads whole as one token, plus a branch in
`_atom` that builds edn_format's value; a new bracket is an alternative in `_TOKEN` before
the word alternative (and out of the word's characters), a padding in `_quick_tokens` (or its
character in `_NOT_QUICK`), an opener or closer `_Mark` in `_MARKS`, and a branch at the
closers in `_read_forms`. Any character the quick tokenizer must not treat as part of a word
goes in `_NOT_QUICK`. Any other `#` form (a tag) would need edn_format's tag handlers, and is
best left to the fallback. `tests/test_edn_reader.py` compares this reader with edn_format on many
inputs, and on random ones (hypothesis); add the new kind to its cases and strategies.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterator
from typing import Any

from edn_format import ImmutableDict, ImmutableList, Keyword, Symbol

# Deeper nesting gives up: a map key or set element is hashed recursively (by edn_format's
# classes), and edn_format, whose stack is deeper, must not be the only one to overflow.
MAX_DEPTH = 64
# Text is tokenized this many characters at a time (ending at a newline), to keep few tokens
# alive at once.
CHUNK = 1 << 20


class GiveUp(Exception):
    """The text is outside the subset this reader handles (or malformed): read it with
    edn_format instead."""


class _Mark:
    """A token that is no value: a bracket, a newline, nothing (whitespace or a comment at the
    end), or a word not seen before."""

    __slots__ = ("closer", "code", "name")

    def __init__(self, name: str, code: int, closer: _Mark | None = None) -> None:
        self.name = name
        self.code = code
        self.closer = closer  # an opener's closer

    def __repr__(self) -> str:
        return f"_Mark({self.name!r})"


_OPEN, _CLOSE, _LINE, _NEW, _NOTHING = range(5)
_CLOSE_BRACE = _Mark("}", _CLOSE)
_CLOSE_BRACKET = _Mark("]", _CLOSE)
_CLOSE_PAREN = _Mark(")", _CLOSE)
_MAP = _Mark("{", _OPEN, _CLOSE_BRACE)
_VECTOR = _Mark("[", _OPEN, _CLOSE_BRACKET)
_LIST = _Mark("(", _OPEN, _CLOSE_PAREN)
_SET = _Mark("#{", _OPEN, _CLOSE_BRACE)
_NEWLINE = _Mark("\n", _LINE)
_MISSING = _Mark("a word not seen before", _NEW)
# What a token stands for when it is no atom, or one every text shares.
_MARKS: dict[str, Any] = {
    "{": _MAP,
    "[": _VECTOR,
    "(": _LIST,
    "#{": _SET,
    "}": _CLOSE_BRACE,
    "]": _CLOSE_BRACKET,
    ")": _CLOSE_PAREN,
    "\n": _NEWLINE,
    "": _Mark("", _NOTHING),
    "nil": None,
    "true": True,
    "false": False,
}

# The general tokenizer. Whitespace and an optional comment, then one token: a newline, a
# bracket, a string, a word (up to whitespace, a bracket, a quote or `;`), or any other single
# character (only an unclosed string's quote gets there, and gives up). The token is optional,
# so that the pattern matches at every position (findall never skips a character: each match
# starts where the last ended) and trailing whitespace or a comment at the end is one empty
# token; with the last alternative, no token ever fails but at the end, so the prefix is never
# given back.
_TOKEN = re.compile(
    r"[ \t,]*(?:;[^\n]*)?"
    r"(\n"
    r"|[\[\](){}]"
    r"|\#\{"
    r'|"[^"\\]*(?:\\.[^"\\]*)*"'
    r'|[^ \t\n,()\[\]{}";]+'
    r"|[\s\S])?"
)
# The quick tokenizer, for ASCII text without strings, comments, `#` (sets and tags), NUL or
# whitespace other than space, tab and newline (str.split's whitespace is str.isspace's:
# \r, \v, \f and \x1c-\x1f as well). There, padding brackets with spaces, a comma as a space
# and a newline as " \0 " make str.split give _TOKEN's tokens, with \0 for a newline.
_NOT_QUICK = '"#;\x00\r\x0b\x0c\x1c\x1d\x1e\x1f'
_QUICK_NEWLINE = "\x00"

# The characters of a keyword's or a symbol's name (edn_format also takes non-ASCII word
# characters, `#`, `:` and `@`, which give up here).
_NAME = r"[A-Za-z0-9.*+!\-_?$%&=<>]"
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)N?")
_FLOAT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)")
_KEYWORD = re.compile(rf":{_NAME}+(?:/{_NAME}+)?")
# A symbol starts with a letter or one of * ! _ ? $ % & = < >, or with - + . not followed by a
# digit (edn_format reads `-5` as a number, `.5` as a symbol: both give up here).
_SYMBOL = re.compile(
    rf"(?:[A-Za-z*!_?$%&=<>]{_NAME}*|[-+.](?:[A-Za-z.*+!\-_?$%&=<>]{_NAME}*)?)(?:/{_NAME}+)?|/"
)
# An escape in a string: edn_format's own (\\uXXXX and one character), else (the empty last
# alternative) one it reads its own way (\\x, octal, \\N{...}, \\U) or keeps (\\q), which gives
# up. Escapes are matched left to right, as the string token pairs a backslash with the next
# character.
_ESCAPE = re.compile(r"""\\(?:([\\'"abfnrtv])|u([0-9A-Fa-f]{4})|)""")
_ESCAPED = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}


def _unescape(match: re.Match[str]) -> str:
    char, code = match.group(1, 2)
    if char is not None:
        return _ESCAPED[char]
    if code is not None:
        return chr(int(code, 16))
    raise GiveUp("a string escape outside the subset")


def _string(token: str) -> str:
    if len(token) < 2:
        raise GiveUp("an unclosed string")
    body = token[1:-1]
    return _ESCAPE.sub(_unescape, body) if "\\" in body else body


def _atom(word: str) -> Any:
    """The value of a word other than nil, true and false, or GiveUp."""
    first = word[0]
    if first == ":":
        if _KEYWORD.fullmatch(word):
            return Keyword(word[1:])
    elif first in "0123456789" or (first in "+-" and word[1:2].isdigit()):
        if _INTEGER.fullmatch(word):
            return int(word[:-1] if word[-1] == "N" else word)
        if _FLOAT.fullmatch(word):
            return float(word)
    elif _SYMBOL.fullmatch(word):
        return Symbol(word)
    raise GiveUp(f"a word outside the subset: {word[:40]!r}")


def _chunks(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of pieces of `text` of about CHUNK characters, each ending after a newline
    (or at the end)."""
    size = len(text)
    start = 0
    while start < size:
        end = text.find("\n", start + CHUNK)
        end = size if end < 0 else end + 1
        yield start, end
        start = end


def _regex_tokens(text: str) -> Iterator[list[str]]:
    """_TOKEN's tokens, a list a chunk (a string running past a chunk's end makes that chunk
    run to the end of the text)."""
    findall = _TOKEN.findall
    size = len(text)
    for start, end in _chunks(text):
        tokens = findall(text, start, end)
        if end < size and '"' in tokens:
            yield findall(text, start, size)
            return
        yield tokens


def _quick_tokens(text: str) -> Iterator[list[str]]:
    for start, end in _chunks(text):
        yield (
            text[start:end]
            .replace(",", " ")
            .replace("[", " [ ")
            .replace("]", " ] ")
            .replace("{", " { ")
            .replace("}", " } ")
            .replace("(", " ( ")
            .replace(")", " ) ")
            .replace("\n", " \x00 ")
            .split()
        )


def read_forms(
    text: str, *, plain_top_maps: bool = False, keyword_names: bool = False
) -> list[tuple[int, int, Any]]:
    """Every top-level form of `text` as (the line it starts on, the line it ends on, its
    value), lines counted from 1; `GiveUp` if the text is not (all) in the subset.

    With `plain_top_maps`, a top-level map is a plain `dict` (equal to edn_format's
    ImmutableDict, but not hashable), which is quicker to build and to read. With
    `keyword_names` as well, that dict holds only the map's keyword keys, by their names
    (`{:type :ok, 1 2}` gives `{"type": Keyword("ok")}`): no keyword is hashed (edn_format's
    Keyword builds a dict to hash itself), which is what a reader of Jepsen's op maps wants."""
    collecting = gc.isenabled()
    gc.disable()  # many small acyclic objects: no use rescanning the heap as they come
    if keyword_names and plain_top_maps:
        top_map: Callable[[Any], Any] = _by_name
    else:
        top_map = dict if plain_top_maps else ImmutableDict
    try:
        return _read_forms(text, top_map)
    except (ValueError, TypeError, RecursionError) as exc:
        # int() of more than 4,300 digits, say: edn_format fails too, and names it.
        raise GiveUp(f"{type(exc).__name__}: {exc}") from None
    finally:
        if collecting:
            gc.enable()


def _by_name(pairs: Any) -> dict[str, Any]:
    return {key.name: value for key, value in pairs if key.__class__ is Keyword}


def _read_forms(text: str, top_map: Callable[[Any], Any]) -> list[tuple[int, int, Any]]:
    known: dict[str, Any] = dict(_MARKS)  # word -> value: shared keywords and symbols
    if text.isascii() and not any(c in text for c in _NOT_QUICK):
        chunks = _quick_tokens(text)
        known[_QUICK_NEWLINE] = _NEWLINE
    else:
        chunks = _regex_tokens(text)
    get = known.get
    forms: list[tuple[int, int, Any]] = []
    stack: list[tuple[list[Any], _Mark | None]] = []
    items: list[Any] = forms  # the open collection's forms so far (unused at the top level)
    kind: _Mark | None = None  # the open collection's opener; None at the top level
    line = 1
    start = 1
    for tokens in chunks:
        for token in tokens:
            value = get(token, _MISSING)
            if value.__class__ is not _Mark:
                if kind is None:
                    forms.append((line, line, value))
                else:
                    items.append(value)
                continue
            code = value.code
            if code == _OPEN:
                if kind is None:
                    start = line
                elif len(stack) >= MAX_DEPTH:
                    raise GiveUp(f"nesting deeper than {MAX_DEPTH}")
                stack.append((items, kind))
                items = []
                kind = value
                continue
            if code == _CLOSE:
                if kind is None or kind.closer is not value:
                    raise GiveUp(f"an unexpected {value.name}")
                if kind is _VECTOR:
                    value = ImmutableList(items, copy=False)
                elif kind is _MAP:
                    if len(items) % 2:
                        raise GiveUp("a map with an odd number of forms")
                    pairs = iter(items)
                    value = (top_map if len(stack) == 1 else ImmutableDict)(
                        zip(pairs, pairs, strict=False)
                    )
                elif kind is _LIST:
                    value = tuple(items)
                else:
                    value = frozenset(items)
                items, kind = stack.pop()
                if kind is None:
                    forms.append((start, line, value))
                else:
                    items.append(value)
                continue
            if code == _LINE:
                line += 1
                continue
            if code == _NOTHING:
                continue
            # A word not seen before, or a string.
            first = line
            if token[0] == '"':
                value = _string(token)
                line += token.count("\n")
            else:
                if token.isdigit() and token.isascii() and (token[0] != "0" or len(token) == 1):
                    value = int(token)
                else:
                    value = _atom(token)
                if len(token) < 4 or value.__class__ is Keyword or value.__class__ is Symbol:
                    known[token] = value
            if kind is None:
                forms.append((first, line, value))
            else:
                items.append(value)
    if stack:
        raise GiveUp("an unclosed form at the end of the text")
    return forms


def loads_all(text: str) -> list[Any]:
    """What `edn_format.loads_all(text)` gives, or `GiveUp`."""
    return [value for _, _, value in read_forms(text)]


__all__ = ["CHUNK", "MAX_DEPTH", "GiveUp", "loads_all", "read_forms"]
