"""A checkpoint's state as data: a JSON document and named numpy arrays, no pickled classes.

A pickle names every object by its class path, so renaming a module or a wrapper breaks the
resume of every run saved before. The state a checkpoint keeps is therefore restricted to
data: dicts with string keys, lists, strings, numbers, booleans and None go into the JSON
document as they are; arrays, numpy scalars, bytes and tuples, which JSON cannot keep
exactly, become small tagged objects, and the arrays themselves are stored beside it
(fast_dqn.run.storage.array_file). `to_data` refuses anything else, so a class cannot creep back in.
"""

import numpy as np

_ARRAY, _SCALAR, _BYTES, _TUPLE = "__array__", "__scalar__", "__bytes__", "__tuple__"
_TAGS = (_ARRAY, _SCALAR, _BYTES, _TUPLE)


_PLAIN = (bool, int, float, str, type(None))


def _stored(value):
    """(tag, array) of a value kept beside the document rather than in it, or None."""
    if type(value) is bytes:
        return _BYTES, np.frombuffer(value, np.uint8)
    if type(value) is np.ndarray or isinstance(value, np.generic):
        if value.dtype != object:
            return (_ARRAY if type(value) is np.ndarray else _SCALAR), np.asarray(value)
    return None


def _check_keys(value, path):
    for key in value:
        if type(key) is not str or key in _TAGS:
            raise TypeError(f"checkpoint state {path or '/'} has the key {key!r}; keys must "
                            "be strings other than the format's tags")


def to_data(tree):
    """(document, arrays): a JSON-ready document and the {name: ndarray} it refers to."""
    arrays = {}

    def encode(value, path):
        if type(value) in _PLAIN:
            return value
        if type(value) is dict:
            _check_keys(value, path)
            return {key: encode(item, f"{path}/{key}") for key, item in value.items()}
        if type(value) in (list, tuple):
            items = [encode(item, f"{path}/{i}") for i, item in enumerate(value)]
            return items if type(value) is list else {_TUPLE: items}
        stored = _stored(value)
        if stored is None:
            raise TypeError(f"checkpoint state {path or '/'} is a {type(value).__name__}; a "
                            "checkpoint keeps only data (see fast_dqn.run.storage.state_tree)")
        tag, arrays[path] = stored
        return {tag: path}

    return encode(tree, ""), arrays


def from_data(document, arrays):
    """The tree `to_data` was given, from its document and arrays."""
    def decode(value):
        if type(value) is list:
            return [decode(item) for item in value]
        if type(value) is not dict:
            return value
        if len(value) == 1:
            (tag, item), = value.items()
            if tag == _ARRAY:
                return arrays[item]
            if tag == _SCALAR:
                return arrays[item][()]
            if tag == _BYTES:
                return arrays[item].tobytes()
            if tag == _TUPLE:
                return tuple(decode(i) for i in item)
        return {key: decode(item) for key, item in value.items()}

    return decode(document)
