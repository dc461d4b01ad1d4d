"""The one error tree (STYLE.md Part 3 item 5): the drawing in ``kafkaguard.errors``' docstring is the tree of
``KafkaguardError`` subclasses the package defines, class for class, parent for parent, module for module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass

import kafkaguard
from kafkaguard import errors
from kafkaguard.errors import KafkaguardError

#: One line of the drawing: tree characters, the class name, its module (under ``kafkaguard.``), a description that
#: may start with ``(also ValueError)``.
_LINE = re.compile(r"^(?P<tree>[ │├└─]*)(?P<name>_?[A-Z]\w*)\s+(?P<module>[a-z_.]+)\s+(?:\(also (?P<also>[\w, ]+)\))?")


@dataclass(frozen=True, slots=True)
class Node:
    module: str
    parent: str | None
    also: frozenset[str]


def drawn_tree() -> dict[str, Node]:
    """The drawing after ``::`` in the docstring of ``kafkaguard.errors``, as name → (module, parent, other bases)."""
    doc = errors.__doc__
    assert doc is not None
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    tree: dict[str, Node] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name) of the open ancestors
    for line in block.splitlines():
        match = _LINE.match(line.removeprefix("    "))
        assert match is not None, f"not a line of the drawing: {line!r}"
        column = len(match["tree"])
        while stack and stack[-1][0] >= column:
            stack.pop()
        name = match["name"]
        assert name not in tree, f"{name} is drawn twice"
        also = frozenset(part.strip() for part in (match["also"] or "").split(",") if part.strip())
        tree[name] = Node(f"kafkaguard.{match['module']}", stack[-1][1] if stack else None, also)
        stack.append((column, name))
    return tree


def import_every_module() -> None:
    """Import every module of the package, so that every subclass is defined (the venv has every extra)."""
    for info in pkgutil.walk_packages(kafkaguard.__path__, "kafkaguard."):
        importlib.import_module(info.name)


def class_tree() -> dict[str, Node]:
    """Every ``KafkaguardError`` subclass defined in the package, found through ``__subclasses__()``."""
    tree: dict[str, Node] = {}

    def visit(cls: type[BaseException], parent: type[BaseException] | None) -> None:
        if not cls.__module__.startswith("kafkaguard"):
            return  # a test's or a library's subclass is not the package's
        assert cls.__name__ not in tree or tree[cls.__name__].module == cls.__module__, f"two {cls.__name__}"
        also = frozenset(base.__name__ for base in cls.__bases__ if not issubclass(base, KafkaguardError))
        tree[cls.__name__] = Node(cls.__module__, parent.__name__ if parent else None, also - {"Exception"})
        for sub in cls.__subclasses__():
            visit(sub, cls)

    visit(KafkaguardError, None)
    return tree


def test_the_drawing_is_the_tree_of_classes():
    import_every_module()
    drawn, defined = drawn_tree(), class_tree()
    assert sorted(set(defined) - set(drawn)) == [], "defined but not drawn in kafkaguard.errors' docstring"
    assert sorted(set(drawn) - set(defined)) == [], "drawn in kafkaguard.errors' docstring but not defined"
    assert drawn == defined


def test_every_error_has_one_parent_in_the_tree():
    import_every_module()
    for name, node in class_tree().items():
        if node.parent is None:
            assert name == "KafkaguardError"
            continue
        module = importlib.import_module(node.module)
        cls = getattr(module, name)
        in_tree = [base for base in cls.__bases__ if issubclass(base, KafkaguardError)]
        assert len(in_tree) == 1, f"{name} has {len(in_tree)} parents in the tree"


def test_the_parser_reads_nesting_and_other_bases():
    drawn = drawn_tree()
    assert drawn["KafkaguardError"] == Node("kafkaguard.errors", None, frozenset())
    assert drawn["ScramProtocolError"].parent == "ScramAuthenticationError"
    assert drawn["ScramStateError"].parent == "ScramError"
    assert drawn["UnsupportedMechanismError"].also == frozenset({"ValueError"})
    assert drawn["AclJsonError"] == Node("kafkaguard.model.acl_json", "InvalidAclError", frozenset())


#: The exception classes of the package deliberately outside the tree, each with why (the module docstring of
#: ``kafkaguard.errors`` says the same): a programming error in kafkaguard's own code, never client input, so that no
#: ``except KafkaguardError`` can take it for an answer.
OUTSIDE_THE_TREE = {
    # a handler forwarding at a version without a field it set: a bug, failing closed (TypeError, as build's)
    "kafkaguard.protocol.build.WideningRequestError",
}


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a module of the package defines at its top level, by qualified name."""
    import_every_module()
    found: dict[str, type[BaseException]] = {}
    for name, module in list(sys.modules.items()):
        if name != "kafkaguard" and not name.startswith("kafkaguard."):
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_derives_from_the_root_or_is_listed():
    defined = defined_exceptions()
    outside = sorted(name for name, cls in defined.items() if not issubclass(cls, KafkaguardError))
    assert outside == sorted(OUTSIDE_THE_TREE)
    assert not [name for name, cls in defined.items() if Exception in cls.__bases__ and cls is not KafkaguardError]


def test_the_walk_finds_classes_outside_errors_py():
    defined = defined_exceptions()
    assert defined["kafkaguard.protocol.connection.CloseConnection"].__mro__[1] is KafkaguardError
    assert issubclass(
        defined["kafkaguard.proxy.walks.Malformed"], defined["kafkaguard.proxy.wire.UpstreamProtocolError"]
    )
    assert "kafkaguard.protocol.build.WideningRequestError" in defined
