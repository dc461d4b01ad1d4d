"""Which super users a client certificate can log in as: for each ``User:`` super user, a certificate subject that
``ssl_principal_mapping_rules`` map to exactly that user, when the check finds one (``certificate_super_users``).
I/O-free; run once at start.

Why: a rule like ``RULE:^CN=([^,]*),OU=ServiceUsers,.*$/$1/L`` turns the subject ``CN=ADMIN,OU=ServiceUsers,O=Example``
into ``User:admin``. If ``User:admin`` is a super user, whoever gets a certificate with such a subject from a CA of
``ssl_cafile`` is a super user too, though nobody meant to hand out super-user certificates.

How, per rule (in order) and super user name:

1. **The replacement is solved for the name.** Its literal parts must appear in the name, in order (after the rule's
   ``/L`` or ``/U`` fold: a ``/L`` rule never makes a name with a capital letter), and what lies between them is what
   each group must have captured, tried in the forms a fold maps onto the name: the piece itself, upper-, lower- and
   capitalized (``admin``, ``ADMIN``, ``Admin``).
2. **Subjects are built from the pattern's parse tree** (Python's ``re._parser`` of the translated pattern): literals
   as written, a character class by a character it admits, a repeat at its minimum and once filled (with
   ``O=Example`` where the class admits it, so that ``.*`` gives a subject a CA would sign), every alternative of a
   branch, lookarounds and anchors as nothing, and each group the replacement uses by the capture found in 1.
   ``DEFAULT`` is tried with the name itself as the subject (a super user named like a DN).
3. **The real mapper decides**: each candidate goes through all the rules, in order (an earlier rule may take it),
   and counts when it gives exactly the super user's name. A candidate Java can write as a certificate's subject (it
   round-trips through an X.501 name, ``x500.rfc2253_from_name_der``) is preferred in the report.

So each super user reported is certain: the subject shown maps to it under the real rules (whether a CA of
``ssl_cafile`` would sign that subject is for the operator to know; a subject Java could not write for any
certificate is reported as such). What the check cannot see, so that a super user not reported is no proof: a
subject this construction does not build — a match that needs a repeat other than its minimum or one filler (or a
minimum above 256), a lookaround's demand, a character class that admits none of the characters tried, more than
``MAX_CANDIDATES`` combinations in one rule, a capture that must be a case form other than the four tried, case
folding beyond ASCII, a replacement that ``replaceAll`` applies twice (a pattern that also matches the empty string
at the end) — and a subject that an earlier rule takes while another subject would have reached the later rule.

Worked example: rules ``RULE:^CN=([^,]*),OU=ServiceUsers,.*$/$1/L,DEFAULT``, super user ``User:admin``: the
replacement ``$1`` with ``/L`` needs group 1 to be a form of ``admin``; the pattern gives
``CN=admin,OU=ServiceUsers,`` and ``CN=admin,OU=ServiceUsers,O=Example`` (and the ``ADMIN``, ``Admin`` forms); the
mapper maps them to ``admin``: reported, with ``CN=admin,OU=ServiceUsers,O=Example`` (a subject Java writes). With
``.../cert-$1/L`` instead, no name without the prefix ``cert-`` comes out of the first rule, and ``admin`` is no DN
for ``DEFAULT``: not reported, and rightly.

Cost model: per super user and rule at most ``MAX_CANDIDATES`` candidates, each mapped once (a few regex matches):
microseconds each, once at start.
"""

from __future__ import annotations

import importlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from kafkaguard.identity.ssl_mapping import (
    PrincipalMappingError,
    Rule,
    SslPrincipalMapper,
    escape_literal_back_references,
)
from kafkaguard.identity.x500 import rfc2253_from_name_der

# The stdlib's own regex parser: the one parse the pattern's matcher used. Typeshed has no stubs for these private
# modules (and the public ``sre_parse`` aliases warn since 3.11), so they are looked up by name; their values are Any.
sre = importlib.import_module("re._constants")
_parser = importlib.import_module("re._parser")

#: Candidate subjects per rule and super user, at most (the combinations of a pattern's branches and repeats).
MAX_CANDIDATES = 64
#: The longest minimum of a repeat the construction builds.
_MAX_REPEAT = 256
#: Ways to split a name over a replacement's groups, at most.
_MAX_SPLITS = 16
#: What a filled repeat holds, where its character class admits it: the rest of a subject a CA would sign.
_FILLER = "O=Example"
#: Characters tried, in order, for a class (the first one it admits stands for it).
_PREFERRED = "aAx0 .-_=,Oe1Z~"
_USER = "User:"

#: A rule's case fold (``/L``: ``str.lower``, ``/U``: ``str.upper``), or None.
Fold = Callable[[str], str] | None


@dataclass(frozen=True, slots=True)
class SuperUserReach:
    """A super user a client certificate can log in as: a subject that maps to it, and the rule that maps it."""

    super_user: str
    subject: str
    rule: str
    #: The subject is one Java writes for a certificate (an X.501 name round-trips to it).
    writable: bool


def certificate_super_users(mapper: SslPrincipalMapper, super_users: Iterable[str]) -> list[SuperUserReach]:
    """The ``User:`` super users (in the order given) for which some subject maps to exactly them under ``mapper``,
    each with one such subject (see the module docstring for what the search cannot see)."""
    found = []
    for super_user in super_users:
        if not super_user.startswith(_USER) or super_user == _USER:
            continue  # Group: and other types: a certificate only ever makes a User (and one with a name)
        reach = _reach(mapper, super_user, super_user[len(_USER) :])
        if reach is not None:
            found.append(reach)
    return found


def _reach(mapper: SslPrincipalMapper, super_user: str, name: str) -> SuperUserReach | None:
    witness: SuperUserReach | None = None
    for rule in mapper.rules:
        for subject in _built(rule, name):
            try:
                mapped = mapper.name_of(subject)
            except PrincipalMappingError:
                continue
            if mapped != name:
                continue
            writable = _java_writes(subject)
            if writable:
                return SuperUserReach(super_user, subject, _taken_by(mapper, subject), writable=True)
            if witness is None:
                witness = SuperUserReach(super_user, subject, _taken_by(mapper, subject), writable=False)
    return witness


def _taken_by(mapper: SslPrincipalMapper, subject: str) -> str:
    """The rule that gives ``subject`` its name (the first that applies)."""
    return next(str(rule) for rule in mapper.rules if rule.apply(subject) is not None)


def _java_writes(subject: str) -> bool:
    """Whether a certificate's subject can be exactly ``subject`` in Java's RFC 2253 form."""
    try:
        name = x509.Name.from_rfc4514_string(subject)
    except ValueError:
        return False
    return rfc2253_from_name_der(name.public_bytes()) == subject


def _built(rule: Rule, name: str) -> list[str]:
    """``_candidates``, or none when this Python's parse tree holds what the construction does not expect: the check
    must never keep the server from starting (that rule is then not seen)."""
    try:
        return list(_candidates(rule, name))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, RecursionError, MemoryError):
        return []


def _candidates(rule: Rule, name: str) -> Iterator[str]:
    """Subjects that may make ``rule`` give ``name`` (steps 1 and 2 of the module docstring)."""
    if rule.compiled is None:  # DEFAULT: the subject itself is the name
        if "=" in name:
            yield name
        return
    compiled = rule.compiled
    try:
        parts = _replacement_parts(escape_literal_back_references(rule.replacement, compiled.groups), compiled.groups)
        tree = _parser.parse(compiled.pattern, compiled.flags)
    except (PrincipalMappingError, re.error):
        return  # a replacement Java cannot expand maps nothing; a tree this Python cannot give: not seen
    fold: Fold = str.lower if rule.to_lower else str.upper if rule.to_upper else None
    if fold is not None and fold(name) != name:
        return  # a /L rule makes no capital letter, a /U rule no small one
    # Under (?i) the literals are tried as written and upper-cased too: Java writes CN=, OU= … in capitals.
    spellings = (False, True) if compiled.flags & re.IGNORECASE else (False,)
    seen: set[str] = set()
    for captures in _splits(parts, name, fold):
        for upper in spellings:
            for subject in _texts(list(tree), _Build(captures, upper)):
                if subject not in seen:
                    seen.add(subject)
                    yield subject
                if len(seen) >= MAX_CANDIDATES:
                    return


def _replacement_parts(replacement: str, groups: int) -> list[str | int]:
    """A replacement as literals and group numbers, read as ``ssl_mapping._expand`` reads it.

    :raises PrincipalMappingError: a replacement Java cannot expand (``ReplacementError``).
    """
    parts: list[str | int] = []
    text: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            text.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and "0" <= replacement[i + 1] <= "9":
            number = ord(replacement[i + 1]) - ord("0")
            i += 2
            while i < n and "0" <= replacement[i] <= "9" and number * 10 + ord(replacement[i]) - ord("0") <= groups:
                number = number * 10 + ord(replacement[i]) - ord("0")
                i += 1
            if number > groups:
                raise PrincipalMappingError(f"No group {number}")
            if text:
                parts.append("".join(text))
                text = []
            parts.append(number)
        elif c in "\\$":
            raise PrincipalMappingError("a replacement Java cannot expand")
        else:
            text.append(c)
            i += 1
    if text:
        parts.append("".join(text))
    return parts


def _splits(parts: Sequence[str | int], name: str, fold: Fold) -> Iterator[dict[int, str]]:
    """Group captures that make the replacement expand to ``name`` after ``fold`` (None: no fold), a capture in
    each case form the fold maps onto its piece."""

    def folded(text: str) -> str:
        return text if fold is None else fold(text)

    def walk(index: int, position: int, pieces: dict[int, str]) -> Iterator[dict[int, str]]:
        if index == len(parts):
            if position == len(name):
                yield dict(pieces)
            return
        part = parts[index]
        if isinstance(part, str):
            literal = folded(part)
            if name.startswith(literal, position):
                yield from walk(index + 1, position + len(literal), pieces)
            return
        if part in pieces:  # the same group twice: the same capture
            piece = pieces[part]
            if name.startswith(piece, position):
                yield from walk(index + 1, position + len(piece), pieces)
            return
        for end in range(position, len(name) + 1):
            pieces[part] = name[position:end]
            yield from walk(index + 1, end, pieces)
            del pieces[part]

    for pieces in itertools.islice(walk(0, 0, {}), _MAX_SPLITS):
        forms = [_case_forms(piece, fold) for piece in pieces.values()]
        for chosen in itertools.product(*forms):
            yield dict(zip(pieces, chosen, strict=True))


def _case_forms(piece: str, fold: Fold) -> list[str]:
    if fold is None:
        return [piece]
    return list(dict.fromkeys((piece, piece.upper(), piece.lower(), piece.capitalize())))


@dataclass(frozen=True, slots=True)
class _Build:
    """How a subject is built from a pattern: the captures its groups get, and whether literals are upper-cased."""

    captures: dict[int, str]
    upper: bool = False


# A re._parser node is (opcode, argument), the argument's type depending on the opcode (an int, a tuple, a
# subpattern): the walkers below take it as Any, since an opcode test does not narrow a tuple's other member.
def _texts(nodes: Sequence[tuple[Any, Any]], build: _Build) -> list[str]:
    """Strings matching the sequence ``nodes`` (with ``build.captures`` in their groups), at most MAX_CANDIDATES."""
    if 0 in build.captures:  # $0: the whole match, which is the subject
        return [build.captures[0]]
    texts = [""]
    for op, arg in nodes:
        options = _node_texts(op, arg, build)
        if not options:
            return []
        texts = [a + b for a, b in itertools.islice(itertools.product(texts, options), MAX_CANDIDATES)]
    return texts


def _node_texts(op: Any, arg: Any, build: _Build) -> list[str]:
    if op is sre.LITERAL:
        return [chr(arg).upper() if build.upper else chr(arg)]
    if op is sre.SUBPATTERN:
        group, _add, _del, sub = arg
        if group is not None and group in build.captures:
            return [build.captures[group]]
        return _texts(list(sub), build)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        least, most, sub = arg
        return _repeat_texts(least, most, sub, build)
    if op is sre.BRANCH:
        return [text for branch in arg[1] for text in _texts(list(branch), build)][:MAX_CANDIDATES]
    if op is sre.ATOMIC_GROUP:
        return _texts(list(arg), build)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return [""]  # anchors and lookarounds take no characters (the mapper checks what they demand)
    char = _pick((op, arg))
    return [] if char is None else [char]  # a single character (a class, ., a category), or nothing known


def _repeat_texts(least: int, most: int, sub: Any, build: _Build) -> list[str]:
    if least > _MAX_REPEAT:
        return []  # a subject that long is not built (``a{2147483647}`` would take the memory): not seen
    items = list(sub)
    if len(items) == 1 and _is_single(items[0]):
        item = items[0]
        char = _pick(item)
        if char is None:
            return [""] if least == 0 else []
        options = [char * least]
        if most >= len(_FILLER):
            filled = "".join(c if _accepts(item, c) else char for c in _FILLER)
            options.append(filled if len(filled) >= least else filled + char * (least - len(filled)))
        elif most > least:
            options.append(char * most)
        return list(dict.fromkeys(options))
    once = _texts(items, build)
    options = [text * least for text in once] if least else [""]
    if most > least:
        options += [text * max(least, 1) for text in once]
    return list(dict.fromkeys(options))[:MAX_CANDIDATES]


def _is_single(item: tuple[Any, Any]) -> bool:
    return item[0] in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.CATEGORY)


def _pick(item: tuple[Any, Any]) -> str | None:
    """A character the single-character node ``item`` admits, or None."""
    if item[0] is sre.LITERAL:
        return chr(item[1])
    return next((c for c in _PREFERRED if _accepts(item, c)), None)


def _accepts(item: tuple[Any, Any], char: str) -> bool:
    op, arg = item
    code = ord(char)
    if op is sre.LITERAL:
        return bool(code == arg)
    if op is sre.NOT_LITERAL:
        return bool(code != arg)
    if op is sre.ANY:
        return char != "\n"
    if op is sre.CATEGORY:
        return _in_category(arg, char)
    if op is sre.IN:
        negated = bool(arg) and arg[0][0] is sre.NEGATE
        members = arg[1:] if negated else arg
        hit = any(_in_class_item(member, char) for member in members)
        return hit != negated
    return False


def _in_class_item(member: tuple[Any, Any], char: str) -> bool:
    op, arg = member
    if op is sre.RANGE:
        return bool(arg[0] <= ord(char) <= arg[1])
    return _accepts(member, char)


def _in_category(category: Any, char: str) -> bool:
    ascii_word = char.isascii() and (char.isalnum() or char == "_")
    checks = {
        sre.CATEGORY_DIGIT: char.isascii() and char.isdigit(),
        sre.CATEGORY_NOT_DIGIT: not (char.isascii() and char.isdigit()),
        sre.CATEGORY_WORD: ascii_word,
        sre.CATEGORY_NOT_WORD: not ascii_word,
        sre.CATEGORY_SPACE: char in " \t\n\r\f\v",
        sre.CATEGORY_NOT_SPACE: char not in " \t\n\r\f\v",
    }
    return bool(checks.get(category, False))
