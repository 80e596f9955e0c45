"""The type stubs cannot drift: for every public name, __init__.pyi (as built and installed beside
the package) declares it, and every public method's parameters (names, kinds, defaults) equal
inspect.signature of the runtime object; inspect.signature works on every public method."""

import ast
import inspect
import pathlib

import pytest

import nosync_metrics as nm

PACKAGE = pathlib.Path(nm.__file__).parent
STUB = ast.parse((PACKAGE / "__init__.pyi").read_text())
DECLARED = {node.name: node for node in STUB.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
# (the exceptions, as the standard library's, take what BaseException takes)
CLASSES = {name: getattr(nm, name) for name in nm.__all__
           if inspect.isclass(getattr(nm, name)) and not issubclass(getattr(nm, name), BaseException)}
# The C++ bases: pybind11 classes, whose methods take what the C++ takes (see the tests at the end).
CPP_BASES = {"Metric", "ClassificationMetric"}
KINDS = {"posonlyargs": inspect.Parameter.POSITIONAL_ONLY, "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
         "kwonlyargs": inspect.Parameter.KEYWORD_ONLY}
SPECIAL = {"__init__", "__new__", "__call__", "__getitem__", "__contains__", "__iter__", "__len__"}


def _public_methods(cls):
    """name -> (function, is_property) for the public methods and properties the package defines
    (torch.nn.Module's and the standard library's come with their own stubs). A task wrapper
    (Accuracy, ...) is a Metric subclass that __new__ turns into a task class: its own __new__ is all
    it adds."""
    found = {}
    if "__new__" in vars(cls) and issubclass(cls, nm.Metric):
        return {"__new__": (cls.__new__, False)}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("nosync_metrics"):
            continue
        for name, value in vars(klass).items():
            if name in found or (name.startswith("_") and name not in SPECIAL):
                continue
            if isinstance(value, property) or type(value).__name__ == "pybind11_static_property":
                found[name] = (None, True)
            elif callable(value):
                found[name] = (getattr(cls, name), False)
    return found


def _stub_member(class_name, member):
    """The stub's declaration of `member` on `class_name` or its stub bases, or None."""
    node = DECLARED.get(class_name)
    if node is None:
        return None
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == member:
            return item
        if isinstance(item, ast.AnnAssign) and item.target.id == member:
            return item
    bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
    return next((m for m in (_stub_member(b, member) for b in bases) if m is not None), None)


def _stub_parameters(function):
    """[(name, kind, default)] of a stub function, as inspect.Parameter has them."""
    arguments = function.args
    out = []
    positional = arguments.posonlyargs + arguments.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(arguments.defaults)) + arguments.defaults
    for argument, default in zip(positional, defaults):
        kind = KINDS["posonlyargs" if argument in arguments.posonlyargs else "args"]
        out.append((argument.arg, kind, default))
    if arguments.vararg:
        out.append((arguments.vararg.arg, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty))
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        out.append((argument.arg, KINDS["kwonlyargs"], inspect.Parameter.empty if default is None else default))
    if arguments.kwarg:
        out.append((arguments.kwarg.arg, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty))
    return [(n, k, d if d is inspect.Parameter.empty else ast.literal_eval(d)) for n, k, d in out]


def _runtime_parameters(function):
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_stub_and_py_typed_are_beside_the_package():
    assert (PACKAGE / "py.typed").read_text() == ""
    assert ast.get_docstring(STUB)


@pytest.mark.parametrize("name", nm.__all__)
def test_every_public_name_is_declared_with_a_docstring(name):
    assert name in DECLARED, name
    assert ast.get_docstring(DECLARED[name]), name


@pytest.mark.parametrize("name", sorted(set(CLASSES) - CPP_BASES))
def test_every_public_method_has_the_runtime_signature(name):
    cls = CLASSES[name]
    methods = _public_methods(cls)
    assert {"__init__", "__new__"} & set(methods), name
    for member, (function, is_property) in methods.items():
        declared = _stub_member(name, member)
        if member == "__new__" and "__new__" not in vars(cls):
            continue  # pybind11's, not a constructor of ours
        assert declared is not None, f"{name}.{member} is not in the stub"
        if is_property:
            continue
        # The stub spells `self` for methods and `cls` for __new__, as the runtime does.
        assert _stub_parameters(declared) == _runtime_parameters(function), f"{name}.{member}"


def test_module_functions_have_the_runtime_signature():
    for name in nm.__all__:
        if inspect.isfunction(getattr(nm, name)):
            assert _stub_parameters(DECLARED[name]) == _runtime_parameters(getattr(nm, name)), name


@pytest.mark.parametrize("name", sorted(set(CLASSES) - CPP_BASES))
def test_inspect_signature_works_on_every_public_method(name):
    for member, (function, is_property) in _public_methods(CLASSES[name]).items():
        if not is_property and not (member == "__new__" and "__new__" not in vars(CLASSES[name])):
            inspect.signature(function)


@pytest.mark.parametrize("name", sorted(CPP_BASES))
def test_inspect_signature_on_the_cpp_bases_methods(name):
    """The bindings open each docstring with a text signature ("name(self, ...)\\n--\\n\\n")."""
    for member, (function, is_property) in _public_methods(CLASSES[name]).items():
        if not is_property and member != "__new__":
            signature = inspect.signature(function)
            assert list(signature.parameters)[0] == "self", f"{name}.{member}"
            assert not function.__doc__.startswith(member), f"{name}.{member}: the signature shows in the docstring"


@pytest.mark.parametrize("name", sorted(CPP_BASES))
def test_the_cpp_bases_methods_have_the_stub_signature_or_every_metric_overrides_them(name):
    """The stub declares the methods as every metric has them. Where a C++ base's method takes less
    (state_dict() without prefix=, to(device) alone), every metric's Python class overrides it with
    the stub's signature (test_every_public_method_has_the_runtime_signature holds them to it)."""
    base = CLASSES[name]
    metrics = [c for n, c in CLASSES.items() if n not in CPP_BASES and issubclass(c, base) and "__new__" not in vars(c)]
    assert metrics
    overridden = []
    for member, (function, is_property) in _public_methods(base).items():
        if is_property or member in ("__init__", "__new__"):  # pybind11's: the bases cannot be made
            continue
        declared = _stub_member(name, member)
        assert declared is not None, f"{name}.{member} is not in the stub"
        if _stub_parameters(declared) != _runtime_parameters(function):
            for metric in metrics:
                above = metric.__mro__[:metric.__mro__.index(base)]
                assert any(member in vars(k) for k in above), f"{metric.__name__}.{member} is {name}'s"
            overridden.append(member)
    assert overridden == {"Metric": ["state_dict", "load_state_dict", "to"],
                          "ClassificationMetric": ["update", "state_dict", "load_state_dict", "to"]}[name]
