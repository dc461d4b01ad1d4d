"""The root ``kafkaguard`` command: only composition. Add command groups with ``app.add_typer(...)``."""

from __future__ import annotations

import typer

from kafkaguard.cli import (
    access,
    acls,
    apply,
    audit,
    check,
    configs,
    console,
    export,
    groups,
    plan,
    proxy,
    serve,
    store,
    users,
    whois,
)

app = typer.Typer(pretty_exceptions_show_locals=False, no_args_is_help=True, help="kafkaguard: Kafka authorization.")
app.command("serve")(serve.serve)
app.command("console")(console.console)
app.command("proxy")(proxy.proxy)
app.add_typer(users.app, name="users")
app.add_typer(audit.app, name="audit")
app.add_typer(store.app, name="store")
app.add_typer(acls.app, name="acls")
app.command("configs")(configs.configs)
users.app.command("configs")(configs.configs)
app.command("plan")(plan.plan)
app.command("apply")(apply.apply)
app.command("export")(export.export)
app.command("check")(check.check)
app.add_typer(groups.app, name="groups")
app.command("can")(access.can)
app.command("who-can")(access.who_can_command)
app.command("whois")(whois.whois)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
