"""The reasons a placement pass returns: a read-only mapping from each waiting job's name to
why it waits, over two columns (the ranked Candidates and a text per rank position) instead of
a dict of every name: at 100k waiting jobs that dict took as long as the rest of the pass."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from itertools import compress, repeat
from operator import attrgetter, is_not

from gtui.core.sched.policy_types import Candidate

_NAME = attrgetter("name")


class Reasons(Mapping[str, str]):
    """Why each job that does not start waits, by name: a read-only mapping over the pass's
    two columns, the ranked Candidates and a text per rank position (None: it started).

    At 100k waiting jobs a dict of every name took as long as the rest of the pass, and its
    main reader, the engine, only walks it: ``items()`` walks the columns, and the first
    lookup by name builds the index once. Two Reasons over the same Candidates compare by
    their texts, which is how the engine sees that a poll changed nothing.
    """

    __slots__ = ("_index", "_len", "_ranked", "_texts")

    def __init__(
        self, ranked: Sequence[Candidate], texts: Sequence[str | None], nones: int | None = None
    ) -> None:
        """``nones``: how many texts are None, if the caller knows (saves counting 100k)."""
        self._ranked = ranked
        self._texts = texts
        self._len = len(texts) - (texts.count(None) if nones is None else nones)
        self._index: dict[str, int] | None = None

    @property
    def ranked(self) -> Sequence[Candidate]:
        """The pass's Candidates in rank order (one column)."""
        return self._ranked

    @property
    def texts(self) -> Sequence[str | None]:
        """The text of each rank position (None: it started) (the other column)."""
        return self._texts

    def __getitem__(self, name: str) -> str:
        index = self._index
        if index is None:
            names = map(_NAME, self._ranked)
            index = self._index = dict(zip(names, range(len(self._texts)), strict=True))
        text = self._texts[index[name]]
        if text is None:
            raise KeyError(name)
        return text

    def __iter__(self) -> Iterator[str]:
        return compress(map(_NAME, self._ranked), map(is_not, self._texts, repeat(None)))

    def __len__(self) -> int:
        return self._len

    def items(self) -> ItemsView[str, str]:
        return _ReasonItems(self)

    def values(self) -> ValuesView[str]:
        return _ReasonValues(self)

    def pairs(self) -> Iterator[tuple[str, str]]:
        """(name, text) in rank order, from the columns."""
        texts = self._texts
        pairs = zip(map(_NAME, self._ranked), texts, strict=True)
        return compress(pairs, map(is_not, texts, repeat(None)))  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Reasons):
            if self._len != other._len:
                return False
            if self._ranked == other._ranked:  # the same Candidates: an identity check each
                return self._texts == other._texts
        if isinstance(other, Mapping):
            return dict(self.pairs()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Reasons({dict(self.pairs())!r})"


class _ReasonItems(ItemsView[str, str]):
    _mapping: Reasons

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return self._mapping.pairs()


class _ReasonValues(ValuesView[str]):
    _mapping: Reasons

    def __iter__(self) -> Iterator[str]:
        return (text for _, text in self._mapping.pairs())
