"""TorchMetrics' classification classes (BinaryAccuracy, MulticlassF1Score, ...) and task
wrappers (Accuracy(task=...), ...), with TorchMetrics 1.6's arguments and defaults, on
nosync-metrics' C++ metrics.

Beyond TorchMetrics, every class takes two keyword arguments: ``weighted=True`` accepts per-sample
weights in ``update(preds, target, weight)``, and ``device`` places the state.
``multidim_average="samplewise"`` gives a value per sample, as TorchMetrics: its state grows by a row
of counts per sample (joined across processes by an all-gather). As in TorchMetrics, the arguments are readable as
attributes (``metric.num_classes``, ``metric.average``, ...), here read-only: they are the C++
metric's options. Accuracy and StatScores take ``zero_division`` and, as TorchMetrics, never use it.

Values come in TorchMetrics 1.6's dtypes: counts in int64 (StatScores' macro average in float32,
its weighted average in the metric's dtype), scores and normalized confusion matrices in float32;
after set_dtype(d), every value in d (StatScores' macro average still float32). Weighted counts
(``weighted=True``) come in the metric's dtype.
"""

import inspect

from . import _C
from .metric import _P, CONSTANTS, bound_arguments, check_bool, check_device, check_int, check_real, check_str
from .metric import arg as _arg
from .metric import metric_class


_EXTRAS = [_arg("weighted", False, _P.KEYWORD_ONLY), _arg("device", None, _P.KEYWORD_ONLY)]
# zero_division: keyword-only where TorchMetrics takes it in **kwargs, after validate_args in F1/F-beta
# (their task classes and task wrappers).
_ZERO_DIVISION = _arg("zero_division", 0, _P.KEYWORD_ONLY)
_ZERO_DIVISION_POSITIONAL = _arg("zero_division", 0)

# TorchMetrics 1.6's parameters of each task class, in its order.
_SCORE_PARAMETERS = {
    "binary": [_arg("threshold", 0.5), _arg("multidim_average", "global"), _arg("ignore_index", None),
               _arg("validate_args", True)],
    "multiclass": [_arg("num_classes"), _arg("top_k", 1), _arg("average", "macro"),
                   _arg("multidim_average", "global"), _arg("ignore_index", None), _arg("validate_args", True)],
    "multilabel": [_arg("num_labels"), _arg("threshold", 0.5), _arg("average", "macro"),
                   _arg("multidim_average", "global"), _arg("ignore_index", None), _arg("validate_args", True)],
}
# TorchMetrics 1.6.2+ (MulticlassStatScores and the classes that inherit its __init__: Accuracy,
# Precision, Recall): num_classes defaults to None, taken with average="micro" only.
_SCORE_PARAMETERS_OPTIONAL_CLASSES = dict(
    _SCORE_PARAMETERS, multiclass=[_arg("num_classes", None)] + _SCORE_PARAMETERS["multiclass"][1:])
_CONFUSION_PARAMETERS = {
    "binary": [_arg("threshold", 0.5), _arg("ignore_index", None), _arg("normalize", None), _arg("validate_args", True)],
    "multiclass": [_arg("num_classes"), _arg("ignore_index", None), _arg("normalize", None),
                   _arg("validate_args", True)],
    "multilabel": [_arg("num_labels"), _arg("threshold", 0.5), _arg("ignore_index", None), _arg("normalize", None),
                   _arg("validate_args", True)],
}
_PREFIX = {"binary": "Binary", "multiclass": "Multiclass", "multilabel": "Multilabel"}
_UPDATE = [_arg("preds"), _arg("target"), _arg("weight", None)]  # weight: with weighted=True only
_UPDATE_DOC = ("Counts a batch: preds and target as TorchMetrics takes them, and with weighted=True a weight per "
               "sample. Checks shapes, dtypes and devices; counts bad values on the device. Never synchronizes.")

# TorchMetrics 1.6's class attributes of each family.
_SCORE_ATTRIBUTES = {"is_differentiable": False, "higher_is_better": True, "full_state_update": False,
                     "plot_lower_bound": 0.0, "plot_upper_bound": 1.0}
_COUNT_ATTRIBUTES = {"is_differentiable": False, "higher_is_better": None, "full_state_update": False}


def _checked(who, arguments):
    """The arguments with their types checked (ValueError naming `who` and the argument, as TorchMetrics
    raises), in the types the C++ options take; value ranges are checked in C++."""
    a = dict(arguments)
    for name in ("num_classes", "num_labels", "top_k"):
        if name in a:
            # num_classes=None: classes unknown, micro only (the C++ metric checks average and top_k)
            a[name] = check_int(who, name, a[name], optional=name == "num_classes")
    a["ignore_index"] = check_int(who, "ignore_index", a["ignore_index"], optional=True)
    if "zero_division" in a:  # (threshold and beta: construct_task's)
        a["zero_division"] = check_real(who, "zero_division", a["zero_division"])
    for name in ("average", "normalize"):
        if name in a:
            check_str(who, name, a[name], optional=True)
    if "multidim_average" in a:
        check_str(who, "multidim_average", a["multidim_average"])
        if a["multidim_average"] not in ("global", "samplewise"):
            raise ValueError(f"{who}: multidim_average must be 'global' or 'samplewise', got "
                             f"{a['multidim_average']!r}")
    check_bool(who, "validate_args", a["validate_args"])
    check_bool(who, "weighted", a["weighted"])
    a["device"] = check_device(who, "device", a["device"])
    return a


def _options(who, task, arguments):
    a = _checked(who, arguments)
    return _C.classification_options(
        task=task,
        num_classes=a.get("num_classes", a.get("num_labels")),
        threshold=a.get("threshold", 0.5),
        top_k=a.get("top_k", 1),
        average=a.get("average", "macro"),
        multidim_average=a.get("multidim_average", "global"),
        ignore_index=a["ignore_index"],
        validate_args=a["validate_args"],
        zero_division=a.get("zero_division", 0),
        weighted=a["weighted"],
        device=a["device"],
    )


def _values_dtype(self):
    """TorchMetrics 1.6 holds counts in int64 states and returns them so, and its scores in float32
    (its _safe_divide's .float()), F-beta's in the default dtype: the C++ metric's own dtypes. Its
    set_dtype(d) converts every state, counts included, to d, and every value then comes in d. Our
    weighted counts are floating, as its floating states: in the metric's dtype."""
    return self.dtype if self._dtype_set or self._arguments["weighted"] else None


def _stat_scores_dtype(self):
    """As _values_dtype, but TorchMetrics' macro average is float32 whatever the states' dtype
    (res.float().mean(), as the C++ gives it). Its weighted average of integer counts comes in the
    default dtype (counts times support / total), as the C++ computes it."""
    return None if self._arguments.get("average") == "macro" else _values_dtype(self)


def _task_class(name, base, task, parameters, construct, doc, attributes, options, result_dtype):
    """A subclass of the C++ metric `base` whose __init__ takes `parameters` (TorchMetrics' names)."""
    def construct_task(self, arguments):
        for option in ("threshold", "beta"):  # kept as the float taken (an int 1 reads back 1.0)
            if option in arguments:
                arguments[option] = check_real(type(self).__name__, option, arguments[option])
        construct(self, task, arguments)

    return metric_class(name, base, parameters, construct_task, doc,
                        shown_always=[p.name for p in parameters
                                      if p.default is _P.empty or p.name in ("num_classes", "num_labels")],
                        update=_UPDATE,
                        update_doc=_UPDATE_DOC, attributes=attributes, options=options, result_dtype=result_dtype)


def _scores(self, base, task, arguments):
    base.__init__(self, _options(type(self).__name__, task, arguments))


def _counts(self, base, task, arguments):
    """StatScores and Accuracy: TorchMetrics takes zero_division (0 or 1) there and never uses it."""
    who = type(self).__name__
    if check_real(who, "zero_division", arguments["zero_division"]) not in (0, 1):
        raise ValueError(f"{who}: zero_division must be 0 or 1, got {arguments['zero_division']}")
    base.__init__(self, _options(who, task, dict(arguments, zero_division=0)))


def _define_family(family, base, doc, construct, attributes, leading=(), zero_division=_ZERO_DIVISION,
                   parameters=None, fixed=None, result_dtype=_values_dtype):
    """The three task classes of one metric, e.g. BinaryAccuracy, MulticlassAccuracy, MultilabelAccuracy.
    Every TorchMetrics parameter is readable as an attribute; `fixed` adds attributes of fixed value."""
    parameters = parameters or _SCORE_PARAMETERS
    classes = {}
    for task, task_parameters in parameters.items():
        ours = list(leading) + task_parameters + ([zero_division] if zero_division else [])
        options = {p.name: _P.empty for p in ours}
        options.update(fixed or {})
        classes[task] = _task_class(_PREFIX[task] + family, base, task, ours + _EXTRAS,
                                    lambda self, t, a, b=base: construct(self, b, t, a), doc, attributes, options,
                                    result_dtype)
    return classes


_STAT_SCORES = _define_family("StatScores", _C.StatScores, "[tp, fp, tn, fn, support] (TorchMetrics' StatScores).",
                              _counts, _COUNT_ATTRIBUTES, parameters=_SCORE_PARAMETERS_OPTIONAL_CLASSES,
                              result_dtype=_stat_scores_dtype)
_ACCURACY = _define_family("Accuracy", _C.Accuracy, "Accuracy (TorchMetrics' semantics; macro by default).",
                           _counts, _SCORE_ATTRIBUTES, parameters=_SCORE_PARAMETERS_OPTIONAL_CLASSES)
_PRECISION = _define_family("Precision", _C.Precision, "Precision tp / (tp + fp).", _scores, _SCORE_ATTRIBUTES,
                            parameters=_SCORE_PARAMETERS_OPTIONAL_CLASSES)
_RECALL = _define_family("Recall", _C.Recall, "Recall tp / (tp + fn).", _scores, _SCORE_ATTRIBUTES,
                         parameters=_SCORE_PARAMETERS_OPTIONAL_CLASSES)
_F1 = _define_family("F1Score", _C.F1Score, "F1 score.", _scores, _SCORE_ATTRIBUTES,
                     zero_division=_ZERO_DIVISION_POSITIONAL, fixed={"beta": 1.0})
_FBETA = _define_family(
    "FBetaScore", _C.FBetaScore, "F-beta score.",
    lambda self, base, task, a: base.__init__(self, a["beta"], _options(type(self).__name__, task, a)),
    _SCORE_ATTRIBUTES, leading=[_arg("beta")], zero_division=_ZERO_DIVISION_POSITIONAL)
_CONFUSION = _define_family(
    "ConfusionMatrix", _C.ConfusionMatrix, "Confusion matrix: rows are targets, columns predictions.",
    lambda self, base, task, a: base.__init__(self, _options(type(self).__name__, task, a), a["normalize"]),
    _COUNT_ATTRIBUTES, zero_division=None, parameters=_CONFUSION_PARAMETERS)

BinaryStatScores, MulticlassStatScores, MultilabelStatScores = _STAT_SCORES.values()
BinaryAccuracy, MulticlassAccuracy, MultilabelAccuracy = _ACCURACY.values()
BinaryPrecision, MulticlassPrecision, MultilabelPrecision = _PRECISION.values()
BinaryRecall, MulticlassRecall, MultilabelRecall = _RECALL.values()
BinaryF1Score, MulticlassF1Score, MultilabelF1Score = _F1.values()
BinaryFBetaScore, MulticlassFBetaScore, MultilabelFBetaScore = _FBETA.values()
BinaryConfusionMatrix, MulticlassConfusionMatrix, MultilabelConfusionMatrix = _CONFUSION.values()


# ---------------------------------------------------------------- task wrappers: Accuracy(task=...)

_WRAPPER_SCORE = [_arg("threshold", 0.5), _arg("num_classes", None), _arg("num_labels", None),
                  _arg("average", "micro"), _arg("multidim_average", "global"), _arg("top_k", 1),
                  _arg("ignore_index", None), _arg("validate_args", True)]
_WRAPPER_CONFUSION = [_arg("threshold", 0.5), _arg("num_classes", None), _arg("num_labels", None),
                      _arg("normalize", None), _arg("ignore_index", None), _arg("validate_args", True)]


def _task_wrapper(name, classes, parameters, doc):
    """TorchMetrics' task wrapper: Accuracy(task="multiclass", num_classes=10) is a MulticlassAccuracy.
    The task is matched in any case ("Multiclass", "BINARY"), as TorchMetrics matches it."""
    signature = inspect.Signature([_arg("cls"), _arg("task")] + parameters + [_P("kwargs", _P.VAR_KEYWORD)])

    def __new__(cls, *args, **kwargs):
        arguments = bound_arguments(name, signature, cls, *args, **kwargs)
        task = arguments.pop("task")
        extra = arguments.pop("kwargs")
        del arguments["cls"]
        if not isinstance(task, str) or task.lower() not in classes:
            raise ValueError(f"{name}: Invalid Classification task: expected one of ['BINARY', 'MULTICLASS', "
                             f"'MULTILABEL'] (any case), but got {task!r}")
        task = task.lower()
        for needed, when in (("num_classes", "multiclass"), ("top_k", "multiclass"), ("num_labels", "multilabel")):
            if task == when and needed in arguments and not isinstance(arguments[needed], int):
                raise ValueError(f"{name}: `{needed}` is expected to be `int` but {type(arguments[needed])} was "
                                 "passed.")
        target = classes[task]
        accepted = inspect.signature(target.__init__).parameters
        chosen = {k: v for k, v in arguments.items() if k in accepted}
        return target(**chosen, **extra)

    __new__.__signature__ = signature
    # As TorchMetrics' wrapper classes: a Metric subclass (never instantiated: __new__ returns the task
    # class's instance) with its Metric base's class attributes (None).
    return type(name, (_C.Metric,), {"__new__": __new__, "__doc__": doc, "__module__": "nosync_metrics",
                                     **CONSTANTS})


StatScores = _task_wrapper("StatScores", _STAT_SCORES, _WRAPPER_SCORE, "StatScores(task=...): a task class.")
Accuracy = _task_wrapper("Accuracy", _ACCURACY, _WRAPPER_SCORE, "Accuracy(task=...): a task class.")
Precision = _task_wrapper("Precision", _PRECISION, _WRAPPER_SCORE, "Precision(task=...): a task class.")
Recall = _task_wrapper("Recall", _RECALL, _WRAPPER_SCORE, "Recall(task=...): a task class.")
F1Score = _task_wrapper("F1Score", _F1, _WRAPPER_SCORE + [_ZERO_DIVISION_POSITIONAL],
                        "F1Score(task=...): a task class.")
FBetaScore = _task_wrapper("FBetaScore", _FBETA, [_arg("beta", 1.0)] + _WRAPPER_SCORE + [_ZERO_DIVISION_POSITIONAL],
                           "FBetaScore(task=..., beta=...): a task class.")
ConfusionMatrix = _task_wrapper("ConfusionMatrix", _CONFUSION, _WRAPPER_CONFUSION,
                                "ConfusionMatrix(task=...): a task class.")
