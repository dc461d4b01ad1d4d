"""Kafka's ``sasl.kerberos.principal.to.local.rules`` (``org.apache.kafka.common.security.kerberos``: ``KerberosName``,
``KerberosShortNamer``, ``KerberosRule``, Kafka 3.9): a Kerberos principal → the name of the ``User:`` principal of a
SASL/GSSAPI login. I/O-free, pure CPU in microseconds.

::

    namer = KerberosShortNamer.from_rules("EXAMPLE.COM", ["RULE:[2:$1@$0](.*@EXAMPLE\\.COM)s/@.*//L", "DEFAULT"])
    namer.short_name(KerberosName.parse("Alice@EXAMPLE.COM"))          # 'Alice'   (DEFAULT: the default realm)
    namer.short_name(KerberosName.parse("App/Host1@EXAMPLE.COM"))      # 'app'     (rule 1: "App@EXAMPLE.COM",
                                                                       #  "@…" removed, lower-cased)
    namer.short_name(KerberosName.parse("bob@OTHER.ORG"))              # raises NoMatchingKerberosRule (another realm)

Kafka's semantics, step by step:

* **The name** (``KerberosName.parse``): ``service[/host]@REALM``, each part without ``/`` or ``@``; a name with
  ``@`` that is not of that form (``a/b/c@R``) is malformed; one without ``@`` is a simple name, used as it is.
* **The rules** (``KerberosShortNamer.from_rules``): each of the list is ``DEFAULT`` or
  ``RULE:[n:format](match)s/from/to/g`` — ``(match)``, ``s/…/…/`` and ``g`` optional — with ``/L`` or ``/U`` (or
  ``L``, ``U``) optionally after it; anything else (``DEFAULT/L`` too) is refused with Kafka's message
  (``InvalidConfigError``). No rules (an empty list) maps no name.
* **Applying**, rule after rule, the first that gives a name wins:

  - ``DEFAULT`` gives the first component when the realm is the default realm (``alice/admin@EXAMPLE.COM`` →
    ``alice``), else nothing;
  - ``RULE:[n:format]`` applies only to names of ``n`` components; ``format`` becomes the base with ``$0`` the realm
    and ``$1``, ``$2`` the components (a ``$`` without a number, or a number past the last component, fails:
    ``BadFormatString``); the rule applies when ``match`` matches the whole base (Java ``matches()``); then
    ``s/from/to/`` replaces the first match of ``from`` (with ``g``: every match) by ``to`` in Java's replacement
    syntax (``$1``, ``\\x``);
  - a result holding ``/`` or ``@`` ends the search: no principal (``NoMatchingKerberosRule``, "Non-simple name
    …"), even if a later rule would have given one; ``L`` lower-cases the result, ``U`` upper-cases it
    (``Locale.ENGLISH``).

  No rule gives a name → ``NoMatchingKerberosRule`` ("No rules apply to …"). Patterns are Java regexes, matched as Java
  matches them or refused at configuration (``ssl_mapping.java_pattern``).
* **Kafka's list setting**: a comma-separated string is split at commas with the spaces around them
  (``split_rules``), so a rule cannot hold a comma, as in Kafka.

In Kafka a name the rules cannot map fails the connection at its first request, after the SASL exchange succeeded;
kafkaguard fails the SASL exchange itself, with the reason (``protocol.mechanisms.GssapiServer``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kafkaguard.errors import InvalidConfigError, KafkaguardError
from kafkaguard.identity.ssl_mapping import ReplacementError, java_pattern, java_replace

#: Kafka's KerberosName.NAME_PARSER: at most two components and a realm.
_NAME_PARSER = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")
#: Kafka's KerberosShortNamer.RULE_PARSER (``\d`` is ASCII in Java).
_RULE_PARSER = re.compile(
    r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))", re.ASCII
)
#: Kafka's KerberosRule.PARAMETER_PATTERN.
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?", re.ASCII)
_NON_SIMPLE = re.compile(r"[/@]")
#: Kafka's ConfigDef LIST splitting.
_COMMA = re.compile(r"\s*,\s*")
_JAVA_INT_MAX = 2**31 - 1
#: What Java's ``String.trim`` removes.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


class KerberosMappingError(KafkaguardError):
    """A Kerberos principal the rules cannot turn into a principal name (the login gets no principal)."""


class NoMatchingKerberosRule(KerberosMappingError):
    """No rule gives a name, or the one that applies gives a non-simple one (Kafka's ``NoMatchingRule``)."""


class BadFormatString(KerberosMappingError):
    """A rule's ``[n:format]`` names a component the name lacks, or has a ``$`` without a number (Kafka's
    ``BadFormatString``)."""


@dataclass(frozen=True, slots=True)
class KerberosName:
    """``service[/host]@realm`` (``host`` and ``realm`` None when absent)."""

    service: str
    host: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        """Kafka's ``KerberosName.parse``.

        :raises KerberosMappingError: a name with ``@`` that is not ``service[/host]@realm`` ("Malformed Kerberos
            name").
        """
        match = _NAME_PARSER.fullmatch(principal)
        if match is None:
            if "@" in principal:
                raise KerberosMappingError(f"Malformed Kerberos name: {principal}")
            return cls(principal)
        return cls(match[1], match[3], match[4])

    def __str__(self) -> str:
        host = "" if self.host is None else f"/{self.host}"
        realm = "" if self.realm is None else f"@{self.realm}"
        return f"{self.service}{host}{realm}"


@dataclass(frozen=True, slots=True)
class KerberosRule:
    """``DEFAULT`` (``default``) or ``RULE:[components:format](match)s/from_pattern/to/[g][/L|/U]``."""

    default_realm: str
    default: bool = False
    components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to: str = ""
    repeat: bool = False
    to_lower: bool = False
    to_upper: bool = False
    #: The regexes as written (the compiled ones are Python translations).
    match_text: str | None = None
    from_text: str | None = None

    def apply(self, params: Sequence[str]) -> str | None:
        """Kafka's ``KerberosRule.apply``: ``params`` is (realm, first component[, second component]); the name this
        rule gives, or None when it does not apply.

        :raises NoMatchingKerberosRule: the result is not a simple name.
        :raises BadFormatString: ``format`` cannot be expanded for this name.
        :raises KerberosMappingError: ``to`` cannot be expanded (Java's replacement errors).
        """
        result: str | None = None
        if self.default:
            if params[0] == self.default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = replace_parameters(self.format, params)
            if self.match is None or self.match.fullmatch(base) is not None:
                if self.from_pattern is None:
                    result = base
                else:
                    try:
                        result = java_replace(self.from_pattern, base, self.to, first_only=not self.repeat)
                    except ReplacementError as e:
                        raise KerberosMappingError(f"rule {self}: {e}") from None
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingKerberosRule(f"Non-simple name {result} after auth_to_local rule {self}")
        if self.to_lower and result is not None:
            result = result.lower()
        elif self.to_upper and result is not None:
            result = result.upper()
        return result

    def __str__(self) -> str:
        if self.default:
            return "DEFAULT"
        text = f"RULE:[{self.components}:{self.format}]"
        if self.match_text is not None:
            text += f"({self.match_text})"
        if self.from_text is not None:
            text += f"s/{self.from_text}/{self.to}/" + ("g" if self.repeat else "")
        return text + ("/L" if self.to_lower else "/U" if self.to_upper else "")


@dataclass(frozen=True, slots=True)
class KerberosShortNamer:
    """Kafka's ``KerberosShortNamer``: the rules, tried in order."""

    rules: tuple[KerberosRule, ...]

    @classmethod
    def from_rules(cls, default_realm: str, rules: Sequence[str] | None) -> KerberosShortNamer:
        """Kafka's ``fromUnparsedRules``: None is ``["DEFAULT"]``. ``default_realm``: the realm ``DEFAULT`` maps
        (Kafka: krb5.conf's ``default_realm``; ``identity.kerberos.default_realm``).

        :raises InvalidConfigError: a rule Kafka refuses, or a regex kafkaguard cannot match as Java does.
        """
        return cls(tuple(_parse_rule(default_realm, rule) for rule in (["DEFAULT"] if rules is None else rules)))

    def short_name(self, name: KerberosName) -> str:
        """Kafka's ``shortName``: a name without realm as it is; else the first rule's name.

        :raises KerberosMappingError: no rule gives a simple name (``NoMatchingKerberosRule``), or the rule that applies
            cannot be expanded (``BadFormatString`` …).
        """
        if name.host is None:
            if name.realm is None:
                return name.service
            params: tuple[str, ...] = (name.realm, name.service)
        else:  # ``parse`` gives a host only with a realm
            params = (name.realm or "", name.service, name.host)
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                return result
        raise NoMatchingKerberosRule(f"No rules apply to {name}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"KerberosShortNamer(principalToLocalRules = [{', '.join(map(str, self.rules))}])"


def split_rules(value: str) -> list[str]:
    """A comma-separated setting as Kafka's ``ConfigDef`` LIST type splits it: trimmed, then cut at commas with the
    spaces around them; an empty string is no rules."""
    trimmed = value.strip(_JAVA_TRIM)
    return [] if not trimmed else _COMMA.split(trimmed)


def replace_parameters(format: str, params: Sequence[str]) -> str:
    """Kafka's ``KerberosRule.replaceParameters``: ``$n`` → ``params[n]``, the rest copied.

    :raises BadFormatString: ``$`` without a number, or a number outside ``params``.
    """
    out: list[str] = []
    start = 0
    while start < len(format):
        match = _PARAMETER.match(format, start)
        if match is None:  # cannot happen: the pattern matches the empty string
            break
        out.append(match[1])
        number = match[3]
        if number is not None:
            if not number or len(number) > 10 or int(number) > _JAVA_INT_MAX:  # Java's NumberFormatException
                raise BadFormatString(f"bad format in username mapping in {number}")
            index = int(number)
            if index >= len(params):
                raise BadFormatString(
                    f"index {index} from {format} is outside of the valid range 0 to {len(params) - 1}"
                )
            out.append(params[index])
        start = match.end()
    return "".join(out)


def _parse_rule(default_realm: str, rule: str) -> KerberosRule:
    match = _RULE_PARSER.match(rule)  # Java's lookingAt
    if match is None:
        raise InvalidConfigError(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise InvalidConfigError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`")
    if match[2] is not None:
        return KerberosRule(default_realm, default=True)
    components = match[5]
    if not components or len(components) > 10 or int(components) > _JAVA_INT_MAX:
        raise InvalidConfigError(f"Invalid rule: `{rule}`: the number of components {components!r} is not a number")
    match_text, from_text = match[8], match[10]
    return KerberosRule(
        default_realm,
        components=int(components),
        format=match[6],
        match=None if match_text is None else java_pattern(match_text, rule),
        from_pattern=None if from_text is None else java_pattern(from_text, rule),
        to=match[11] or "",
        repeat=match[12] == "g",
        to_lower=match[13] == "L",
        to_upper=match[13] == "U",
        match_text=match_text,
        from_text=from_text,
    )
