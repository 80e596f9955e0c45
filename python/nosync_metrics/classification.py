"""TorchMetrics' classification classes (BinaryAccuracy, MulticlassF1Score, ...) and task
wrappers (Accuracy(task=...), ...), with TorchMetrics 1.6's arguments and defaults, on
nosync-metrics' C++ metrics.

Beyond TorchMetrics, every class takes two keyword arguments: ``weighted=True`` accepts per-sample
weights in ``update(preds, target, weight)``, and ``device`` places the state.
``multidim_average`` accepts ``"global"`` only.
"""

import inspect

from . import _C
from .metric import _P, metric_class
from .metric import arg as _arg


_EXTRAS = [_arg("weighted", False, _P.KEYWORD_ONLY), _arg("device", None, _P.KEYWORD_ONLY)]
_ZERO_DIVISION = _arg("zero_division", 0, _P.KEYWORD_ONLY)

# TorchMetrics 1.6's parameters of each task class, in its order.
_SCORE_PARAMETERS = {
    "binary": [_arg("threshold", 0.5), _arg("multidim_average", "global"), _arg("ignore_index", None),
               _arg("validate_args", True)],
    "multiclass": [_arg("num_classes"), _arg("top_k", 1), _arg("average", "macro"),
                   _arg("multidim_average", "global"), _arg("ignore_index", None), _arg("validate_args", True)],
    "multilabel": [_arg("num_labels"), _arg("threshold", 0.5), _arg("average", "macro"),
                   _arg("multidim_average", "global"), _arg("ignore_index", None), _arg("validate_args", True)],
}
_CONFUSION_PARAMETERS = {
    "binary": [_arg("threshold", 0.5), _arg("ignore_index", None), _arg("normalize", None), _arg("validate_args", True)],
    "multiclass": [_arg("num_classes"), _arg("ignore_index", None), _arg("normalize", None),
                   _arg("validate_args", True)],
    "multilabel": [_arg("num_labels"), _arg("threshold", 0.5), _arg("ignore_index", None), _arg("normalize", None),
                   _arg("validate_args", True)],
}
_PREFIX = {"binary": "Binary", "multiclass": "Multiclass", "multilabel": "Multilabel"}


def _options(task, arguments):
    return _C.classification_options(
        task=task,
        num_classes=arguments.get("num_classes", arguments.get("num_labels")),
        threshold=arguments.get("threshold", 0.5),
        top_k=arguments.get("top_k", 1),
        average=arguments.get("average", "macro"),
        multidim_average=arguments.get("multidim_average", "global"),
        ignore_index=arguments.get("ignore_index"),
        validate_args=arguments.get("validate_args", True),
        zero_division=arguments.get("zero_division", 0),
        weighted=arguments["weighted"],
        device=arguments["device"],
    )


def _task_class(name, base, task, parameters, construct, doc):
    """A subclass of the C++ metric `base` whose __init__ takes `parameters` (TorchMetrics' names)."""
    return metric_class(name, base, parameters, lambda self, arguments: construct(self, task, arguments), doc,
                        shown_always=[p.name for p in parameters if p.default is _P.empty])


def _scores(self, base, task, arguments):
    base.__init__(self, _options(task, arguments))


def _define_family(family, base, doc, construct, leading=(), zero_division=True, parameters=None):
    """The three task classes of one metric, e.g. BinaryAccuracy, MulticlassAccuracy, MultilabelAccuracy."""
    parameters = parameters or _SCORE_PARAMETERS
    classes = {}
    for task, task_parameters in parameters.items():
        extras = ([_ZERO_DIVISION] if zero_division else []) + _EXTRAS
        name = _PREFIX[task] + family
        classes[task] = _task_class(name, base, task, list(leading) + task_parameters + extras,
                                    lambda self, t, a, b=base: construct(self, b, t, a), doc)
    return classes


_STAT_SCORES = _define_family("StatScores", _C.StatScores, "[tp, fp, tn, fn, support] (TorchMetrics' StatScores).",
                              _scores, zero_division=False)
_ACCURACY = _define_family("Accuracy", _C.Accuracy, "Accuracy (TorchMetrics' semantics; macro by default).",
                           _scores, zero_division=False)
_PRECISION = _define_family("Precision", _C.Precision, "Precision tp / (tp + fp).", _scores)
_RECALL = _define_family("Recall", _C.Recall, "Recall tp / (tp + fn).", _scores)
_F1 = _define_family("F1Score", _C.F1Score, "F1 score.", _scores)
_FBETA = _define_family("FBetaScore", _C.FBetaScore, "F-beta score.",
                        lambda self, base, task, a: base.__init__(self, float(a["beta"]), _options(task, a)),
                        leading=[_arg("beta")])
_CONFUSION = _define_family("ConfusionMatrix", _C.ConfusionMatrix,
                            "Confusion matrix: rows are targets, columns predictions.",
                            lambda self, base, task, a: base.__init__(self, _options(task, a), a["normalize"]),
                            zero_division=False, parameters=_CONFUSION_PARAMETERS)

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
    """TorchMetrics' task wrapper: Accuracy(task="multiclass", num_classes=10) is a MulticlassAccuracy."""
    signature = inspect.Signature([_arg("cls"), _arg("task")] + parameters + [_P("kwargs", _P.VAR_KEYWORD)])

    def __new__(cls, *args, **kwargs):
        bound = signature.bind(cls, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        task = arguments.pop("task")
        extra = arguments.pop("kwargs")
        del arguments["cls"]
        if task not in classes:
            raise ValueError(f"{name}: task must be 'binary', 'multiclass' or 'multilabel', got {task!r}")
        if task == "multiclass" and not isinstance(arguments["num_classes"], int):
            raise ValueError(f"{name}: `num_classes` is expected to be `int` but {type(arguments['num_classes'])} was passed.")
        if task == "multilabel" and not isinstance(arguments["num_labels"], int):
            raise ValueError(f"{name}: `num_labels` is expected to be `int` but {type(arguments['num_labels'])} was passed.")
        target = classes[task]
        accepted = inspect.signature(target.__init__).parameters
        chosen = {k: v for k, v in arguments.items() if k in accepted}
        return target(**chosen, **extra)

    __new__.__signature__ = signature
    return type(name, (), {"__new__": __new__, "__doc__": doc, "__module__": "nosync_metrics"})


StatScores = _task_wrapper("StatScores", _STAT_SCORES, _WRAPPER_SCORE, "StatScores(task=...): a task class.")
Accuracy = _task_wrapper("Accuracy", _ACCURACY, _WRAPPER_SCORE, "Accuracy(task=...): a task class.")
Precision = _task_wrapper("Precision", _PRECISION, _WRAPPER_SCORE, "Precision(task=...): a task class.")
Recall = _task_wrapper("Recall", _RECALL, _WRAPPER_SCORE, "Recall(task=...): a task class.")
F1Score = _task_wrapper("F1Score", _F1, _WRAPPER_SCORE, "F1Score(task=...): a task class.")
FBetaScore = _task_wrapper("FBetaScore", _FBETA, [_arg("beta", 1.0)] + _WRAPPER_SCORE,
                           "FBetaScore(task=..., beta=...): a task class.")
ConfusionMatrix = _task_wrapper("ConfusionMatrix", _CONFUSION, _WRAPPER_CONFUSION,
                                "ConfusionMatrix(task=...): a task class.")
