"""The ways a model, a collection or a metric is copied through bytes, shared by the tests."""

import io
import pickle

import torch


def pickled(obj):
    return pickle.loads(pickle.dumps(obj))


def torch_saved(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)  # a whole model, not only tensors (2.6's default is True)
