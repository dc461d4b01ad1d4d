"""Kafka's ``ssl.principal.mapping.rules`` (``org.apache.kafka.common.security.ssl.SslPrincipalMapper``, Kafka 3.9):
a certificate subject in RFC 2253 form (``x500.rfc2253_name``) → the name of the ``User:`` principal. I/O-free.

::

    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT")
    mapper.name_of("CN=Duke,OU=ServiceUsers,O=Org,C=US")    # 'duke'   (the first rule: $1, lower-cased)
    mapper.name_of("CN=Duke,OU=Other,O=Org,C=US")           # 'CN=Duke,OU=Other,O=Org,C=US'   (DEFAULT)
    SslPrincipalMapper.from_rules("RULE:^CN=x$/y/").name_of("CN=z")   # raises NoMatchingRule

Kafka's semantics, step by step:

* **Splitting.** The whole setting is trimmed (Java ``trim``: every character up to U+0020) and cut with Kafka's
  ``RULE_SPLITTER`` regex; a rule is ``DEFAULT`` or ``RULE:pattern/replacement/`` with an optional ``L`` or ``U``,
  where ``\\`` escapes any character (so ``\\/`` and ``\\,`` stay in the pattern). Empty rules are ignored; anything
  else (``default``, ``DEFAULT/L``, ``RULE:a/b`` without its closing ``/``) is refused with Kafka's
  ``Invalid rule: `…`, unmatched substring: `…``` (``InvalidConfigError``).
* **Applying.** Rules are tried in order; the first that gives a name wins. ``DEFAULT`` gives the DN itself. A
  ``RULE`` applies only when its pattern matches the *whole* DN (Java ``matches()``); its result is then
  ``dn.replaceAll(pattern, replacement)`` (every match, found as Java's ``find`` finds them, is replaced), then lower-
  or upper-cased (``Locale.ENGLISH``). No rule applies → ``NoMatchingRule`` ("No rules apply to …, rules […]").
* **Replacements** follow Java's ``Matcher.appendReplacement``: ``$n`` takes as many digits as still name a group,
  ``\\x`` is a literal ``x``, ``${name}`` a named group. Before that, Kafka's ``escapeLiteralBackReferences`` turns a
  ``$n`` whose group does not exist into a literal (``$1@$3`` with two groups → ``duke@$3``) — including the quirk
  that it inserts its backslashes at positions of the *unmodified* replacement, so a second such ``$n`` is escaped
  one character early. A replacement Java cannot expand (``$1`` in a pattern without groups, a dangling ``\\`` or
  ``$``) fails when the rule matches, as in Kafka: ``ReplacementError``.
* **Patterns** are Java regexes, translated to Python's ``re`` where the two differ and refused at configuration
  where kafkaguard cannot match Java exactly (see ``java_pattern``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from kafkaguard.errors import InvalidConfigError, KafkaguardError

#: Java's line terminators: ``.`` matches none of them; ``$`` and ``\Z`` match before one that ends the input.
_JAVA_DOT = "[^\\n\\r\\x85\\u2028\\u2029]"
#: Java's ``$`` without MULTILINE: the end, or before a final \r\n, \n (not after \r), \r, U+0085, U+2028, U+2029.
_JAVA_END = r"(?:(?=\r\n\Z)|(?<!\r)(?=\n\Z)|(?=[\r\x85\u2028\u2029]\Z)|\Z)"
#: Java's ``\v`` (vertical whitespace), as the inside of a character class.
_JAVA_VERTICAL = "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"

#: Kafka's RULE_PATTERN, with Java's ``.`` spelt out (the DN and the rules may hold any character).
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)".replace(".", _JAVA_DOT)
RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|" + _JAVA_END + ")", re.ASCII)
RULE_PARSER = re.compile(_RULE_PATTERN, re.ASCII)
#: Kafka's BACK_REFERENCE_PATTERN (``\$(\d+)``, ASCII digits as in Java).
BACK_REFERENCE = re.compile(r"\$([0-9]+)")

_JAVA_INT_MAX = 2**31 - 1
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


class PrincipalMappingError(KafkaguardError):
    """A distinguished name that ``ssl.principal.mapping.rules`` cannot turn into a principal name."""


class NoMatchingRule(PrincipalMappingError):
    """No rule applies to the name (Kafka's ``NoMatchingRule``; the TLS client is not authenticated)."""


class ReplacementError(PrincipalMappingError):
    """A matching rule whose replacement Java cannot expand (Java's IllegalArgumentException,
    IndexOutOfBoundsException or NumberFormatException while Kafka maps the name)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: ``DEFAULT`` (``pattern`` None) or ``RULE:pattern/replacement/[L|U]``."""

    pattern: str | None = None
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False
    compiled: re.Pattern[str] | None = None

    def apply(self, dn: str) -> str | None:
        """The name this rule gives ``dn``, or None when it does not apply.

        :raises ReplacementError: the pattern matches and the replacement cannot be expanded.
        """
        if self.compiled is None:
            return dn
        if self.compiled.fullmatch(dn) is None:
            return None
        result = _replace_all(self.compiled, dn, escape_literal_back_references(self.replacement, self.compiled.groups))
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "/L" if self.to_lower else "/U" if self.to_upper else ""
        return f"RULE:{self.pattern}/{self.replacement}{case}"


@dataclass(frozen=True, slots=True)
class SslPrincipalMapper:
    rules: tuple[Rule, ...]

    @classmethod
    def from_rules(cls, rules: str | None) -> SslPrincipalMapper:
        """Kafka's ``SslPrincipalMapper.fromRules``: None is ``DEFAULT``.

        :raises InvalidConfigError: a rule Kafka refuses, or a pattern kafkaguard cannot match as Java does.
        """
        return cls(tuple(_parse_rule(rule) for rule in split_rules(rules) if rule))

    def name_of(self, distinguished_name: str) -> str:
        """Kafka's ``getName``: the first rule's name for ``distinguished_name``.

        :raises NoMatchingRule: no rule applies.
        :raises ReplacementError: the first matching rule's replacement cannot be expanded.
        """
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def split_rules(rules: str | None) -> list[str]:
    """Kafka's ``splitRules``: group 1 of every ``RULE_SPLITTER`` match, found as Java's ``find()`` finds them
    (after an empty match the next search starts one character later)."""
    text = ("DEFAULT" if rules is None else rules).strip(_JAVA_TRIM)
    found, position = [], 0
    while position <= len(text):
        match = RULE_SPLITTER.search(text, position)
        if match is None:
            break
        found.append(match[1])
        position = match.end() + (1 if match.end() == match.start() else 0)
    return found


def _parse_rule(rule: str) -> Rule:
    match = RULE_PARSER.match(rule)
    if match is None:  # cannot happen (the last alternative matches the empty string); Kafka checks it too
        raise InvalidConfigError(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise InvalidConfigError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`")
    if match[1] is not None:
        return Rule()
    pattern = match[2]
    return Rule(pattern, match[4], match[6] == "L", match[6] == "U", java_pattern(pattern, rule))


def java_pattern(pattern: str, rule: str) -> re.Pattern[str]:
    """A Java regex as a Python pattern that matches what Java's would.

    Translated: ``.`` (Java excludes \\r, U+0085, U+2028, U+2029 too), ``$`` and ``\\Z`` (before any final line
    terminator), ``\\z``, ``\\v``; ``\\w \\d \\s`` are ASCII as in Java (``re.ASCII``), and so is ``(?i)``.
    Refused (``InvalidConfigError`` naming the rule): what ``re`` cannot compile (``\\p{…}``, ``\\Q…\\E``, inline flags
    not at the start …), and what it would compile differently: back references and octal escapes (``\\1``,
    ``\\012``), ``\\b``/``\\B`` (Unicode in JDK 17), nested classes and ``&&``, named groups, inline flags other
    than ``i``, and ``{`` that is not a Java quantifier (Java refuses it; Python reads it literally).
    """
    out: list[str] = []
    in_class = False
    i, n = 0, len(pattern)

    def refuse(reason: str) -> InvalidConfigError:
        return InvalidConfigError(
            f"Invalid rule: `{rule}`: kafkaguard cannot match the pattern `{pattern}` as Java does: {reason}"
        )

    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 == n:
                raise refuse("it ends with a lone backslash")
            e = pattern[i + 1]
            i += 2
            if e.isdigit():
                raise refuse(f"back references and octal escapes (\\{e}) are not supported")
            if e in "bB":
                raise refuse(f"\\{e} is a Unicode word boundary in Java 17")
            if e == "U":
                raise refuse("\\U is not a Java escape (Python reads it as a code point)")
            if e == "v":
                out.append(_JAVA_VERTICAL if in_class else f"[{_JAVA_VERTICAL}]")
            elif e == "Z" and not in_class:
                out.append(_JAVA_END)
            elif e == "z" and not in_class:
                out.append(r"\Z")
            else:
                out.append("\\" + e)
            continue
        if in_class:
            if c == "[":
                raise refuse("nested character classes are not supported")
            if pattern.startswith("&&", i):
                raise refuse("character class intersection (&&) is not supported")
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):  # a "]" right after "[" or "[^" is literal for both
                out.append("\\]")
                i += 1
        elif c == ".":
            out.append(_JAVA_DOT)
        elif c == "$":
            out.append(_JAVA_END)
        elif c == "{":
            quantifier = re.compile(r"\{[0-9]+(,[0-9]*)?\}").match(pattern, i)
            if quantifier is None:
                raise refuse("'{' that is not a quantifier {n}, {n,} or {n,m} (Java refuses it)")
            out.append(quantifier[0])
            i = quantifier.end()
            continue
        elif c == "(" and pattern.startswith("?", i + 1):
            group = re.compile(r"\(\?(?::|=|!|<=|<!|>|[a-zA-Z-]*[:)])").match(pattern, i)
            if group is None:
                raise refuse("named groups and (?P…), (?#…), (?(…) are not supported")
            flags = group[0][2:-1]
            if group[0][-1] in ":)" and flags not in ("", "<", ">") and set(flags) - set("i-"):
                raise refuse(f"inline flags other than i ((?{flags}…)) are not supported")
            out.append(group[0])
            i = group.end()
            continue
        else:
            out.append(c)
        i += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # FutureWarning: "possible nested set", "possible set intersection"
            return re.compile("".join(out), re.ASCII)
    except (re.error, FutureWarning) as e:
        raise refuse(str(e)) from e


def escape_literal_back_references(unescaped: str, groups: int) -> str:
    """Kafka's ``escapeLiteralBackReferences``, quirk included: matches are found in ``unescaped`` but the
    backslashes go into the string as already modified, at the unmodified positions.

    :raises ReplacementError: a ``$n`` too large for a Java int (Java's NumberFormatException).
    """
    if groups == 0:
        return unescaped
    value = unescaped
    for match in BACK_REFERENCE.finditer(unescaped):
        digits = match[1]
        if digits.startswith("0"):
            continue
        index = int(digits)
        if index > _JAVA_INT_MAX:
            raise ReplacementError(f'For input string: "{digits}"')
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = match.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value


def _replace_all(pattern: re.Pattern[str], text: str, replacement: str) -> str:
    """Java's ``text.replaceAll(pattern, replacement)``: every ``find()`` match, in turn, expanded."""
    return java_replace(pattern, text, replacement, first_only=False)


def java_replace(pattern: re.Pattern[str], text: str, replacement: str, *, first_only: bool) -> str:
    """Java's ``Matcher.replaceAll`` (or with ``first_only``, ``replaceFirst``) of ``pattern`` (a ``java_pattern``)
    in ``text``: every ``find()`` match in turn (or only the first), expanded as Java expands ``replacement``.

    :raises ReplacementError: the replacement cannot be expanded (Java's message).
    """
    out: list[str] = []
    last, position = 0, 0
    while position <= len(text):
        match = pattern.search(text, position)
        if match is None:
            break
        out.append(text[last : match.start()])
        out.append(_expand(replacement, match))
        last = match.end()
        if first_only:
            break
        position = match.end() + (1 if match.end() == match.start() else 0)
    out.append(text[last:])
    return "".join(out)


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.appendExpandedReplacement`` (JDK 17) for one match.

    :raises ReplacementError: with Java's message, where Java throws.
    """
    out: list[str] = []
    groups = match.re.groups
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 == n:
                raise ReplacementError("character to be escaped is missing")
            out.append(replacement[i + 1])
            i += 2
        elif c == "$":
            i += 1
            if i == n:
                raise ReplacementError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = i + 1
                while end < n and replacement[end].isascii() and replacement[end].isalnum():
                    end += 1
                name = replacement[i + 1 : end]
                if not name:
                    raise ReplacementError("named capturing group has 0 length name")
                if not replacement.startswith("}", end):
                    raise ReplacementError("named capturing group is missing trailing '}'")
                if name[0].isdigit():
                    raise ReplacementError(f"capturing group name {{{name}}} starts with digit character")
                raise ReplacementError(f"No group with name {{{name}}}")  # java_pattern refuses named groups
            if not "0" <= replacement[i] <= "9":
                raise ReplacementError("Illegal group reference")
            number = ord(replacement[i]) - ord("0")
            i += 1
            while i < n and "0" <= replacement[i] <= "9" and number * 10 + ord(replacement[i]) - ord("0") <= groups:
                number = number * 10 + ord(replacement[i]) - ord("0")
                i += 1
            if number > groups:
                raise ReplacementError(f"No group {number}")
            out.append(match[number] or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
