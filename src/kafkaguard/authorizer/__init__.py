"""Authorization decisions with Kafka's StandardAuthorizer semantics, and their explanations."""

from __future__ import annotations

from kafkaguard.authorizer.results import AclCreateResult, AclDeleteResult
from kafkaguard.authorizer.rules import Decision, DefaultRule, MatchingAclRule, Rule, SuperUserRule
from kafkaguard.authorizer.standard import AuthorizerSnapshot, StandardAuthorizer, parse_super_users
from kafkaguard.model.group import groups_by_member, members_by_group  # where they are defined; kept here too

__all__ = [
    "AclCreateResult",
    "AclDeleteResult",
    "AuthorizerSnapshot",
    "Decision",
    "DefaultRule",
    "MatchingAclRule",
    "Rule",
    "StandardAuthorizer",
    "SuperUserRule",
    "groups_by_member",
    "members_by_group",
    "parse_super_users",
]
