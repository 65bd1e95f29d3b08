"""A trained model exported for use outside trainer-run (``trainer-export``): its flat arrays
by name in one ``.npz`` (:mod:`.flat_arrays`, the default), or its inference graph as an ONNX model
(:mod:`.onnx_graph`, which :mod:`.trace` records and :mod:`.onnx_ops` translates), written by
:mod:`.saving`."""

from .saving import FORMATS, default_path, save

__all__ = ["FORMATS", "default_path", "save"]
