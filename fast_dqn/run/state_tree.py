"""A checkpoint's state as data: a JSON document and named numpy arrays, no pickled classes.

A pickle names every object by its class path, so renaming a module or a wrapper breaks the
resume of every run saved before. The state a checkpoint keeps is therefore restricted to
data: dicts with string keys, lists, strings, numbers, booleans and None go into the JSON
document as they are; arrays, numpy scalars, bytes and tuples, which JSON cannot keep
exactly, become small tagged objects, and the arrays themselves are stored beside it
(fast_dqn.run.array_file). `to_data` refuses anything else, so a class cannot creep back in.
"""

import numpy as np

_ARRAY, _SCALAR, _BYTES, _TUPLE = "__array__", "__scalar__", "__bytes__", "__tuple__"
_TAGS = (_ARRAY, _SCALAR, _BYTES, _TUPLE)


def to_data(tree):
    """(document, arrays): a JSON-ready document and the {name: ndarray} it refers to."""
    arrays = {}

    def encode(value, path):
        if value is None or type(value) in (bool, int, float, str):
            return value
        if type(value) is dict:
            for key in value:
                if type(key) is not str or key in _TAGS:
                    raise TypeError(f"checkpoint state {path or '/'} has the key {key!r}; "
                                    "keys must be strings other than the format's tags")
            return {key: encode(item, f"{path}/{key}") for key, item in value.items()}
        if type(value) is list:
            return [encode(item, f"{path}/{i}") for i, item in enumerate(value)]
        if type(value) is tuple:
            return {_TUPLE: [encode(item, f"{path}/{i}") for i, item in enumerate(value)]}
        if type(value) is bytes:
            arrays[path] = np.frombuffer(value, np.uint8)
            return {_BYTES: path}
        if isinstance(value, np.generic) and value.dtype != object:
            arrays[path] = np.asarray(value)
            return {_SCALAR: path}
        if type(value) is np.ndarray and value.dtype != object:
            arrays[path] = value
            return {_ARRAY: path}
        raise TypeError(f"checkpoint state {path or '/'} is a {type(value).__name__}; a "
                        "checkpoint keeps only data (see fast_dqn.run.state_tree)")

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
