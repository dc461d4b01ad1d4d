"""Why a decision came out as it did: the rule that decided it and every ACL that matched (SEMANTICS.md §3.7).

The rules print as Kafka's audit log prints them (``SuperUser``, ``DefaultAllow``, ``DefaultDeny``,
``MatchingAcl(acl=…)``), so kafkaguard's audit records and Kafka's authorizer log read the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkaguard.model import Action, AuthorizationResult, RequestContext, StoredAcl, is_group


@dataclass(frozen=True, slots=True)
class SuperUserRule:
    principal: str

    def __str__(self) -> str:
        return "SuperUser"


@dataclass(frozen=True, slots=True)
class DefaultRule:
    """No ACL decided: either no ACL applies to the resource at all (then ``allow.everyone.if.no.acl.found``
    decides) or ACLs apply to the resource but none to this principal, host and operation (always DENY)."""

    result: AuthorizationResult
    resource_has_acls: bool

    def __str__(self) -> str:
        return "DefaultAllow" if self.result is AuthorizationResult.ALLOWED else "DefaultDeny"


@dataclass(frozen=True, slots=True)
class MatchingAclRule:
    acl: StoredAcl

    def __str__(self) -> str:
        return f"MatchingAcl(acl={self.acl.binding}, id={self.acl.id})"


Rule = SuperUserRule | DefaultRule | MatchingAclRule


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one action, with its explanation.

    ``matching_acls`` holds every ACL whose principal, host, operation and resource match (ALLOW and DENY),
    most specific first: the literal ACL, then PREFIXED from longest to shortest, then the ``*`` wildcard.
    ``relevant_acl_count`` counts every ACL on the resource, whoever it is for.
    """

    context: RequestContext
    action: Action
    result: AuthorizationResult
    rule: Rule
    matching_acls: tuple[StoredAcl, ...] = ()
    relevant_acl_count: int = 0

    @property
    def allowed(self) -> bool:
        return self.result is AuthorizationResult.ALLOWED

    def explanation(self) -> str:
        """One paragraph a person can read: who, what, the verdict and why."""
        who = f"{self.context.principal} from {self.context.host}"
        what = f"{self.action.operation} on {self.action.resource_pattern}"
        head = f"{self.result}: {who} {what}"
        rule = self.rule
        if isinstance(rule, SuperUserRule):
            return f"{head}, because {rule.principal} is a super user (super users bypass every ACL)."
        if isinstance(rule, MatchingAclRule):
            binding = rule.acl.binding
            verb = "denies" if self.result is AuthorizationResult.DENIED else "allows"
            why = (
                "a matching DENY always wins"
                if self.result is AuthorizationResult.DENIED
                else "it matches and no DENY matches"
            )
            through = ""
            group = binding.entry.principal
            if is_group(group):
                source = "by its login's token" if group in self.context.groups else "by a stored membership"
                through = f" through group {group}, which {self.context.principal} belongs to ({source})"
            return (
                f"{head}, because ACL {rule.acl.id} {verb} it{through} ({why}): {binding.entry.permission_type} "
                f"{binding.entry.operation} for {binding.entry.principal} from host {binding.entry.host} "
                f"on {binding.pattern}."
            )
        if rule.resource_has_acls:
            return (
                f"{head}, because {self.relevant_acl_count} ACL(s) apply to the resource but none matches this "
                f"principal, host and operation (access is denied unless an ACL allows it)."
            )
        setting = "true" if rule.result is AuthorizationResult.ALLOWED else "false"
        return f"{head}, because no ACL applies to the resource and allow.everyone.if.no.acl.found is {setting}."
